#!/usr/bin/env bash
# Lints openapi.yaml with Redocly CLI's recommended ruleset, the linter
# generated-client users run first. The CLI version is pinned by
# tools/openapi-lint/package-lock.json (installed with npm ci when missing);
# exceptions are listed, with reasons, in tools/openapi-lint/.redocly.lint-ignore.yaml.
# Fails on any error or warning. Without npm: a failure when CI is set, else
# a skip recorded in $RUNNEL_SKIP_LOG (see the Makefile).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=tools/openapi-lint
bin=$dir/node_modules/.bin/redocly
if [ ! -x "$bin" ]; then
  if ! command -v npm >/dev/null; then
    msg="openapi lint: npm not installed (Redocly CLI)"
    if [ -n "${CI:-}" ]; then echo "$msg" >&2; exit 1; fi
    [ -z "${RUNNEL_SKIP_LOG:-}" ] || echo "$msg" >>"$RUNNEL_SKIP_LOG"
    echo "$msg: skipped" >&2
    exit 0
  fi
  (cd "$dir" && npm ci --no-audit --no-fund --silent)
fi
out=$("$bin" lint openapi.yaml --config "$dir/redocly.yaml" --format=summary 2>&1) || { echo "$out" >&2; exit 1; }
if grep -Eq '^(error|warning) ' <<<"$out"; then
  echo "$out" >&2
  echo "openapi lint: warnings count as failures" >&2
  exit 1
fi
echo "openapi.yaml: Redocly recommended ruleset, 0 errors, 0 warnings"
