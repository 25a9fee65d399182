# The two commands a newcomer needs: `make run` and `make test`.
GO       ?= go
BIN      := bin/runnel
DATA_DIR ?= ./data
CORE_PKGS := ./segments/... ./raftfsm/... ./api/... ./kafkaproto/...
# Version and commit for `runnel version` and GET /v1/cluster, for builds where
# the Go toolchain stamps no VCS information (GOFLAGS=-buildvcs=false, worktrees).
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo unknown)
COMMIT   ?= $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
LDFLAGS  := -X github.com/runnel/runnel/server.linkVersion=$(VERSION) -X github.com/runnel/runnel/server.linkCommit=$(COMMIT)
# Fuzz targets run briefly in `make test`; `make fuzz FUZZTIME=10m` runs them longer.
FUZZTIME ?= 10s

.PHONY: quota-check run build install test test-all test-core test-integration node-deps lint-openapi fuzz fuzz-short kgo-integration kgo-short bench bench-short bench-http bench-auth bench-scale bench-cluster-scale chaos lint lint-go generate clean

run: build
	$(BIN) serve --data-dir $(DATA_DIR)

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/runnel

# runnel into $(go env GOPATH)/bin (or $GOBIN), for the CLI on your PATH.
install:
	$(GO) install -ldflags '$(LDFLAGS)' ./cmd/runnel
	@dir=$$($(GO) env GOBIN); [ -n "$$dir" ] || dir=$$($(GO) env GOPATH)/bin; echo "installed $$dir/runnel"

# Tests that need a tool that is missing (kcat, chromium, node, npm) skip
# outside CI and are listed at the end; with CI=true they fail instead.
SKIP_LOG := $(CURDIR)/bin/skipped-tests.txt

test:
	@mkdir -p bin && rm -f $(SKIP_LOG)
	@RUNNEL_SKIP_LOG=$(SKIP_LOG) $(MAKE) --no-print-directory test-all; status=$$?; \
	if [ -s $(SKIP_LOG) ]; then \
	  echo "make test: $$(wc -l <$(SKIP_LOG)) test(s) skipped for a missing tool (.ci/run installs them; CI=true makes this a failure):"; \
	  sed 's/^/  /' $(SKIP_LOG); \
	fi; exit $$status

test-all: lint-go test-core test-integration fuzz-short lint-openapi kgo-short

# npm packages of the Node-based tests, from their committed locks, when not
# installed yet (no npm: the tests that need them skip or, in CI, fail).
node-deps:
	@for d in server/testdata/kafkajs tools/openapi-lint; do \
	  if [ -f $$d/package-lock.json ] && [ ! -d $$d/node_modules ] && command -v npm >/dev/null; then \
	    echo "npm ci in $$d"; (cd $$d && npm ci --no-audit --no-fund --silent) || exit 1; \
	  fi; \
	done

# openapi.yaml against Redocly CLI's recommended ruleset: 0 errors, 0 warnings.
lint-openapi: node-deps
	@./scripts/openapi-lint.sh

# Core packages under the race detector.
test-core:
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 15m $(CORE_PKGS)

# Everything else: real runnel processes, real Kafka clients, headless Chromium.
# -timeout bounds one package's binary: ./server alone took 650 s in a quiet
# CI run and 1,083 s in a loaded one, so 20m was a budget a busy 2-core
# machine could exceed with nothing hung.
test-integration: node-deps
	$(GO) test -count=1 -timeout 45m $$($(GO) list ./... | grep -v -E '/(segments|raftfsm|api|kafkaproto)(/|$$)')

# Every fuzz target, briefly. Listed by `go test -list '^Fuzz'`.
fuzz-short:
	@FUZZTIME=3s ./scripts/fuzz.sh

fuzz:
	@FUZZTIME=$(FUZZTIME) ./scripts/fuzz.sh

# franz-go's own pkg/kgo tests against a runnel node (slow: not in test);
# KGO_NODES=3 runs them against a 3-node cluster with replication factor 3.
kgo-integration:
	@GO=$(GO) ./scripts/kgo-integration.sh

# In `make test`: the whole package against one node and against 3 nodes
# (replication factor 3), with 2,000 records per test instead of 20,000
# (147 passed, 0 failed, 9 skipped each way: share groups, KIP-848, and the
# SCRAM/OAuth tests that need seeds configured; about 1.5 + 2 minutes on a
# quiet machine: the 20m timeout is for a hung run, not a loaded one).
kgo-short:
	@GO=$(GO) KGO_TEST_RECORDS=2000 KGO_TIMEOUT=20m RUNNEL_KGO_PORT_BASE=18500 ./scripts/kgo-integration.sh
	@GO=$(GO) KGO_NODES=3 KGO_TEST_RECORDS=2000 KGO_TIMEOUT=20m RUNNEL_KGO_PORT_BASE=18500 ./scripts/kgo-integration.sh

bench:
	RUNNEL_BENCH=1 $(GO) test -run '^$$' -bench . -benchmem -count=1 -timeout 60m ./...

# The HTTP door against the Kafka listener of the same node (issue 17): MB/s
# and ratios for produce (JSON, NDJSON, binary batch) and consume (JSON,
# binary batch), then single-record produce latency at 500 req/s.
bench-http:
	RUNNEL_BENCH=1 $(GO) test -run '^$$' -bench 'HTTPDoor|HTTPProduceLatency' -benchtime 1x -count=1 -timeout 30m ./server/

# Authentication's cost (issue 15): a node with --auth required, SCRAM-SHA-512
# and 100 ACLs against one without, Kafka and HTTP, median of interleaved
# rounds; then the authorizer's decisions/s with 100 and 10,000 ACLs, indexed
# and by the scan it replaced.
bench-auth:
	RUNNEL_BENCH=1 $(GO) test -run '^$$' -bench 'AuthOverhead' -benchtime 1x -count=1 -timeout 30m ./server/
	$(GO) test -run '^$$' -bench 'Allowed' -count=1 ./server/auth/

# Client quotas over the issue's 20 s window (make test runs 8 s with wider
# bounds): the measured MiB/s of limited and unlimited producers, both doors.
quota-check:
	RUNNEL_QUOTA_WINDOW=20s $(GO) test -count=1 -v -run 'TestQuotasLimitProducers' -timeout 10m ./server/

# One node holding many partitions (issue 19): creation over HTTP, disk,
# RSS, restart after a clean stop and after kill -9, produce afterwards, and
# the one-partition topic creation rate; then Kafka Metadata for every topic
# of a node holding as many (size, time, RSS). PARTITIONS=1000000 is the issue's
# goal (partition logs open on first use, so its memory and
# disk stay small). CI runs a 2,000-partition version through bench-short.
PARTITIONS ?= 100000
bench-scale:
	RUNNEL_BENCH=1 RUNNEL_BENCH_PARTITIONS=$(PARTITIONS) $(GO) test -run '^$$' -bench 'NodeScale|MetadataAllTopics' -benchtime 1x -count=1 -timeout 120m ./server/

# Three nodes holding PARTITIONS with replication factor 3 (issue 19):
# creation, RSS and idle CPU per node, kill -9 of the busiest leader (time
# until all are led again and writable with acks=all), restart, and a
# controlled shutdown. The issue asks for 300000. A run leaves ~11 GB of files
# and their inodes in the kernel's caches, which slowed the next run's bursts
# 2-3x on the 23 GiB machine: start runs alike (as root: sync; echo 3 >
# /proc/sys/vm/drop_caches); the benchmark logs MemFree, Cached and Slab.
bench-cluster-scale:
	RUNNEL_BENCH=1 RUNNEL_BENCH_PARTITIONS=$(PARTITIONS) $(GO) test -run '^$$' -bench 'ClusterScale' -benchtime 1x -count=1 -timeout 120m ./server/

# Every benchmark once with a small workload: CI's check that they still run.
bench-short:
	$(GO) test -run '^$$' -bench . -benchtime 1x -count=1 -timeout 15m ./...

# The chaos suite (server/e2e_chaos_test.go, plus the long kill -9 and crash
# runs): every scenario, CHAOS_COUNT times; README's results table is rewritten
# from what they report. `make test` runs the short scenarios only.
CHAOS_COUNT ?= 1
CHAOS_RESULTS := $(CURDIR)/bin/chaos-results.jsonl
chaos:
	@mkdir -p bin && rm -f $(CHAOS_RESULTS)
	@RUNNEL_CHAOS=1 RUNNEL_CHAOS_RESULTS=$(CHAOS_RESULTS) $(GO) test -count=$(CHAOS_COUNT) -timeout 180m -run 'Chaos|Crash|Kill' ./...; status=$$?; \
	$(GO) run ./scripts/chaostable -results $(CHAOS_RESULTS) -readme README.md || status=1; exit $$status

lint: lint-go
	$(GO) vet ./...

# gofmt and staticcheck (make test runs this; test-core runs vet).
lint-go:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.6.1 ./...

generate:
	$(GO) generate ./...

clean:
	rm -rf bin
