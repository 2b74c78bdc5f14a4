#!/usr/bin/env bash
# The system prerequisites of `make test`, in one list (the README's
# "Prerequisites" names the same). Checks each; installs the missing ones
# with apt-get when run as root, and otherwise prints the one command to run
# and exits 1. `make test` and .ci/run run it first.
#
#   scripts/prereqs.sh          check, and install as root
#   scripts/prereqs.sh --check  check only
set -euo pipefail

# Each prerequisite: the Debian package and the check that it is usable,
# the way the tests use it.
pg_server() { # initdb and postgres, where internal/localpg looks
  command -v initdb >/dev/null || compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null
}
c_compiler() { command -v gcc >/dev/null; }
psql_client() { command -v psql >/dev/null; }
node_js() { command -v node >/dev/null; }
npm_cli() { command -v npm >/dev/null; }
psycopg2() { /usr/bin/python3 -c 'import psycopg2' 2>/dev/null; } # the tests run Debian's python3
redis() { command -v redis-server >/dev/null; }
chromium_browser() { command -v chromium >/dev/null; }

PREREQS=(
  "gcc               c_compiler   gcc: cgo, which go test -race needs"
  "postgresql        pg_server    PostgreSQL server binaries: throwaway clusters and the consensus backend"
  "postgresql-client psql_client  psql: client tests"
  "nodejs            node_js      Node.js: node-postgres client tests"
  "npm               npm_cli      npm: installs node-postgres into testdata/clients"
  "python3-psycopg2  psycopg2     psycopg2: Python client tests"
  "redis-server      redis        redis-server: the Redis sink tests"
  "chromium          chromium_browser  headless Chromium: the HTTP feed's browser test (feed.TestBrowser, some 300 MB)"
)

check_only=false
case "${1:-}" in
  --check) check_only=true ;;
  "") ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

missing=()
for p in "${PREREQS[@]}"; do
  read -r pkg check what <<<"$p"
  if ! "$check"; then
    echo "prereqs: missing $pkg ($what)" >&2
    missing+=("$pkg")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

cmd="apt-get update && apt-get install -y ${missing[*]}"
if $check_only || [ "$(id -u)" != 0 ]; then
  echo "prereqs: run as root: $cmd" >&2
  exit 1
fi
echo "prereqs: installing ${missing[*]}" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
for p in "${PREREQS[@]}"; do
  read -r pkg check what <<<"$p"
  if ! "$check"; then
    echo "prereqs: $pkg installed but still not usable ($what)" >&2
    exit 1
  fi
done
