# shardtail: see README.md.
GO ?= go
# The race detector slows tests several times; the suite is sized for it.
TEST_FLAGS ?= -race -timeout 30m
BIN := bin/shardtail

.PHONY: run build test test-short bench lint fuzz clean

## run: build and start `shardtail serve` on the embedded default
## (./shardtail-data: file blobs + SQLite consensus; pgwire 127.0.0.1:6875).
run: build
	./$(BIN) serve

build:
	$(GO) build -o $(BIN) ./cmd/shardtail

## test: every test, with the race detector. Tests that need PostgreSQL use
## SHARDTAIL_TEST_POSTGRES_URL when set, else start a throwaway cluster.
test:
	$(GO) test $(TEST_FLAGS) ./...

test-short:
	$(GO) test -short $(TEST_FLAGS) ./...

## bench: the Go benchmarks (no race detector).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -timeout 60m ./...

## lint: gofmt and go vet must be clean.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

## fuzz: a short run of every fuzz target.
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzDecodePart -fuzztime 60s ./persist/codec/
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 60s ./sql/

clean:
	rm -rf bin
