#!/usr/bin/env bash
# Runs franz-go's own pkg/kgo tests (its integration tests among them)
# against runnel started here on loopback (one node, or a 3-node cluster
# with KGO_NODES=3, topics then created with replication factor 3), and
# prints how many pass, fail and skip, with the failing tests' names.
#
# The franz-go source comes from the Go module cache (`go mod download`) at
# the version pinned below, copied to a writable temporary tree (the cache
# is read-only) and tested there with GOFLAGS=-mod=mod. Nothing is kept.
#
#   KGO_VERSION   franz-go version to test (default: the pinned one)
#   KGO_RUN       -run pattern (default: every test)
#   KGO_SKIP      -skip pattern (default: none; TestTxnEtl runs too)
#   KGO_TIMEOUT   go test -timeout (default 30m)
#   KGO_TEST_RECORDS  records per producing test (franz-go's; default 20000 here)
#   KGO_NODES     1 (default) or 3: combined controller+broker nodes; the
#                 tests get every node as a seed and KGO_TEST_RF=KGO_NODES
#   RUNNEL_KGO_PORT_BASE  first of 3 loopback ports per node (default 18400: below
#                         the kernel's ephemeral range, 32768 and up, so no outgoing
#                         connection can take one first; servertest uses 20000-32000)
#   KGO_RESULTS   where to write the go test -json output (default: temp)
set -euo pipefail

KGO_VERSION=${KGO_VERSION:-v1.22.3} # the franz-go go.mod requires
GO=${GO:-go}
base=${RUNNEL_KGO_PORT_BASE:-18400}
nodes=${KGO_NODES:-1}
case "$nodes" in 1 | 3) ;; *) echo "KGO_NODES=$nodes: want 1 or 3" >&2; exit 2 ;; esac
# Node i (1-based) listens on base+3(i-1): kafka, http, raft.
port() { echo $((base + 3 * ($1 - 1) + $2)); }
controllers= seeds=
for i in $(seq 1 "$nodes"); do
  controllers="$controllers${controllers:+,}$i@127.0.0.1:$(port "$i" 2)"
  seeds="$seeds${seeds:+,}127.0.0.1:$(port "$i" 0)"
done

root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
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

echo "starting $nodes runnel node(s): kafka $seeds"
for i in $(seq 1 "$nodes"); do
  args=(serve --data-dir "$work/data-$i" --node-id "$i"
    --kafka-addr "127.0.0.1:$(port "$i" 0)" --http-addr "127.0.0.1:$(port "$i" 1)" --raft-addr "127.0.0.1:$(port "$i" 2)"
    --log-level warn)
  if [ "$nodes" -gt 1 ]; then args+=(--controllers "$controllers"); fi
  "$work/runnel" "${args[@]}" >"$work/runnel-$i.log" 2>&1 &
  pids+=($!)
done
logs() { for i in $(seq 1 "$nodes"); do echo "--- node $i:" >&2; tail -20 "$work/runnel-$i.log" >&2; done; }
for i in $(seq 1 "$nodes"); do
  http=127.0.0.1:$(port "$i" 1)
  for _ in $(seq 1 300); do
    if curl -fsS "http://$http/readyz" >/dev/null 2>&1; then break; fi
    kill -0 "${pids[$((i - 1))]}" 2>/dev/null || { logs; exit 1; }
    sleep 0.2
  done
  curl -fsS "http://$http/readyz" >/dev/null || { logs; exit 1; }
done

results=${KGO_RESULTS:-$work/results.json}
echo "running franz-go pkg/kgo tests (run: ${KGO_RUN:-all}, skip: ${KGO_SKIP:-none})"
set +e
(cd "$work/franz-go/pkg/kgo" &&
  KGO_SEEDS=$seeds KGO_TEST_RF=$nodes KGO_TEST_RECORDS=${KGO_TEST_RECORDS:-20000} KGO_LOG_LEVEL=none \
    GOFLAGS=-mod=mod $GO test -json -count=1 -timeout "${KGO_TIMEOUT:-30m}" -run "${KGO_RUN:-.}" -skip "${KGO_SKIP:-^$}" . >"$results")
rc=$?
set -e

# Top-level tests only (subtests are counted with their parent).
count() { grep "\"Action\":\"$1\"" "$results" | grep '"Test":"' | grep -v '"Test":"[^"]*/' || true; }
pass=$(count pass | wc -l) fail=$(count fail | wc -l) skip=$(count skip | wc -l)
echo "franz-go $KGO_VERSION pkg/kgo against $nodes runnel node(s): $pass passed, $fail failed, $skip skipped, others left out by -skip (go test exit $rc)"
if [ "$fail" -gt 0 ]; then
  echo "failed:"
  count fail | sed -n 's/.*"Test":"\([^"]*\)".*/  \1/p'
fi
if grep -q '"Action":"fail"' "$results" && [ "$fail" -eq 0 ]; then
  echo "the package failed outside a test (timeout or panic); last output:"
  grep '"Output"' "$results" | tail -20 | sed -n 's/.*"Output":"\(.*\)".*/  \1/p'
fi
exit "$rc"
