#!/usr/bin/env bash
# Runs franz-go's own pkg/kgo tests (its integration tests among them)
# against a single runnel node started here on loopback, and prints how
# many pass, fail and skip, with the failing tests' names.
#
# The franz-go source comes from the Go module cache (`go mod download`) at
# the version pinned below, copied to a writable temporary tree (the cache
# is read-only) and tested there with GOFLAGS=-mod=mod. Nothing is kept.
#
#   KGO_VERSION   franz-go version to test (default: the pinned one)
#   KGO_RUN       -run pattern (default: every test)
#   KGO_SKIP      -skip pattern (default ^TestTxn: runnel has no
#                 transactions yet, and TestTxnEtl waits for them forever
#                 instead of failing); KGO_SKIP= runs everything
#   KGO_TIMEOUT   go test -timeout (default 30m)
#   KGO_TEST_RECORDS  records per producing test (franz-go's; default 20000 here)
#   RUNNEL_KGO_PORT_BASE  first of three loopback ports (default 39400)
#   KGO_RESULTS   where to write the go test -json output (default: temp)
set -euo pipefail

KGO_VERSION=${KGO_VERSION:-v1.22.3} # the franz-go go.mod requires
GO=${GO:-go}
base=${RUNNEL_KGO_PORT_BASE:-39400}
kafka=127.0.0.1:$base http=127.0.0.1:$((base + 1)) raft=127.0.0.1:$((base + 2))

root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  chmod -R u+w "$work" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "building runnel"
(cd "$root" && $GO build -o "$work/runnel" ./cmd/runnel)

echo "fetching franz-go $KGO_VERSION through the module cache"
src=$(cd "$root" && $GO mod download -json "github.com/twmb/franz-go@$KGO_VERSION" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
[ -d "$src/pkg/kgo" ] || { echo "no pkg/kgo in '$src'" >&2; exit 1; }
cp -R "$src" "$work/franz-go"
chmod -R u+w "$work/franz-go"

echo "starting runnel: kafka $kafka, http $http"
"$work/runnel" serve --data-dir "$work/data" --node-id 1 \
  --kafka-addr "$kafka" --http-addr "$http" --raft-addr "$raft" \
  --log-level warn >"$work/runnel.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  if curl -fsS "http://$http/readyz" >/dev/null 2>&1; then break; fi
  kill -0 "$pid" 2>/dev/null || { cat "$work/runnel.log" >&2; exit 1; }
  sleep 0.2
done
curl -fsS "http://$http/readyz" >/dev/null

results=${KGO_RESULTS:-$work/results.json}
echo "running franz-go pkg/kgo tests (run: ${KGO_RUN:-all}, skip: ${KGO_SKIP-^TestTxn})"
set +e
(cd "$work/franz-go/pkg/kgo" &&
  KGO_SEEDS=$kafka KGO_TEST_RF=1 KGO_TEST_RECORDS=${KGO_TEST_RECORDS:-20000} KGO_LOG_LEVEL=none \
    GOFLAGS=-mod=mod $GO test -json -count=1 -timeout "${KGO_TIMEOUT:-30m}" -run "${KGO_RUN:-.}" -skip "${KGO_SKIP-^TestTxn}" . >"$results")
rc=$?
set -e

# Top-level tests only (subtests are counted with their parent).
count() { grep "\"Action\":\"$1\"" "$results" | grep '"Test":"' | grep -v '"Test":"[^"]*/' || true; }
pass=$(count pass | wc -l) fail=$(count fail | wc -l) skip=$(count skip | wc -l)
echo "franz-go $KGO_VERSION pkg/kgo against runnel: $pass passed, $fail failed, $skip skipped, others left out by -skip (go test exit $rc)"
if [ "$fail" -gt 0 ]; then
  echo "failed:"
  count fail | sed -n 's/.*"Test":"\([^"]*\)".*/  \1/p'
fi
if grep -q '"Action":"fail"' "$results" && [ "$fail" -eq 0 ]; then
  echo "the package failed outside a test (timeout or panic); last output:"
  grep '"Output"' "$results" | tail -20 | sed -n 's/.*"Output":"\(.*\)".*/  \1/p'
fi
exit "$rc"
