#!/usr/bin/env bash
# Runs every native Go fuzz target in the module for FUZZTIME each.
set -euo pipefail
FUZZTIME=${FUZZTIME:-3s}
GO=${GO:-go}
for pkg in $($GO list ./...); do
  for target in $($GO test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    echo "fuzz $pkg $target ($FUZZTIME)"
    $GO test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg"
  done
done
