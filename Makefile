# shardtail: see README.md.
GO ?= go
# The race detector slows tests several times; the suite is sized for it.
TEST_FLAGS ?= -race -timeout 30m
BIN := bin/shardtail

.PHONY: run build prereqs test test-short bench lint fuzz clean

## run: build and start `shardtail serve` on the embedded default
## (./shardtail-data: file blobs + SQLite consensus; pgwire 127.0.0.1:6875).
run: build
	./$(BIN) serve

build:
	$(GO) build -o $(BIN) ./cmd/shardtail

## prereqs: check every system package the tests need, installing the
## missing ones when run as root (scripts/prereqs.sh holds the one list).
prereqs:
	@bash scripts/prereqs.sh

# Real client libraries for the client tests (node-postgres).
CLIENTS := testdata/clients/node_modules
export NODE_PATH := $(CURDIR)/$(CLIENTS)

$(CLIENTS): testdata/clients/package.json testdata/clients/package-lock.json | prereqs
	cd testdata/clients && npm ci --no-audit --no-fund
	touch $(CLIENTS)

## test: every test, with the race detector, after prereqs. Tests that need
## PostgreSQL use SHARDTAIL_TEST_POSTGRES_URL when set, else start a
## throwaway cluster.
test: prereqs $(CLIENTS)
	$(GO) test $(TEST_FLAGS) ./...

test-short: prereqs $(CLIENTS)
	$(GO) test -short $(TEST_FLAGS) ./...

## bench: the Go benchmarks (no race detector), then a quick smoke run of the
## A/B suite (report in $TMPDIR/shardtail-bench-quick). The full run, which
## rewrites the committed report in bench/results/: ./bin/shardtail bench
bench: build
	$(GO) test -run '^$$' -bench . -benchmem -timeout 60m ./...
	./$(BIN) bench --quick

## lint: gofmt and go vet must be clean.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

## fuzz: a short run (FUZZTIME each, default 5s) of every fuzz target in
## the module, found by name so that a new one is never left out.
FUZZTIME ?= 5s
fuzz:
	@set -e; n=0; \
	for f in $$(grep -rl --include='*_test.go' '^func Fuzz' . | sort); do \
	  dir=$$(dirname $$f); \
	  for t in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
	    echo "== $$t $$dir/ ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) $$dir/; \
	    n=$$((n+1)); \
	  done; \
	done; \
	echo "fuzz: $$n targets ran"

clean:
	rm -rf bin
