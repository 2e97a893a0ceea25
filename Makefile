# agentflow — make help lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

GO        ?= go
BIN       := $(CURDIR)/bin
DATA      := $(CURDIR)/.data
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
TEMPORAL_CLI_VERSION := v1.5.1
TEST_TIMEOUT ?= 18m

export TEMPORAL_ADDRESS ?= 127.0.0.1:7233

.PHONY: help
help: ## list targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## build bin/agentctl (lean: validate, graph) and bin/agentctl-engine (every other verb)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/agentctl ./cmd/agentctl-lean
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/agentctl-engine ./cmd/agentctl

$(BIN)/temporal:
	@mkdir -p $(BIN)
	CGO_ENABLED=0 GOBIN=$(BIN) $(GO) install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_CLI_VERSION)

.PHONY: temporal
temporal: $(BIN)/temporal ## build the Temporal CLI dev server (pinned) into bin/

.PHONY: images
images: ## build the base, example and test tool images locally (no registry)
	./tools/build-images.sh

.PHONY: test
test: temporal images ## run every test: unit, Docker integration, end-to-end on a dev server
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -tags 'integration e2e' ./...

.PHONY: test-unit
test-unit: ## fast unit tests only (no Docker, no Temporal server)
	$(GO) test -count=1 ./...

.PHONY: lint
lint: ## gofmt + go vet + go.mod/go.sum tidy
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet -tags 'integration e2e load' ./...
	@out=$$($(GO) mod tidy -diff 2>&1) || { echo "go.mod/go.sum not tidy (run go mod tidy):"; echo "$$out"; exit 1; }

.PHONY: alerts
alerts: ## check and unit-test deploy/prometheus/alerts.yml with promtool (built once, pinned), and every dashboard/alert query against the worker's metrics
	promtool=$$(scripts/test-servers.sh promtool) && cd deploy && $$promtool check rules prometheus/alerts.yml && $$promtool test rules prometheus/alerts_test.yml
	promtool=$$(scripts/test-servers.sh promtool) && AGENTFLOW_PROMTOOL=$$promtool AGENTFLOW_REQUIRE_DOCKER=1 $(GO) test -count=1 -tags integration ./deploy/

.PHONY: bench
bench: temporal images ## benchmarks with in-run baselines (see docs/BENCHMARKS.md; builds the MinIO test server once)
	$(GO) test -run '^$$' -bench . -benchmem ./bench/...
	minio=$$(scripts/test-servers.sh minio) && AGENTFLOW_MINIO=$$minio AGENTFLOW_BENCH=1 $(GO) test -count=1 -tags integration -run 'Bench' -v ./bench/...

.PHONY: load
load: temporal ## load harness: 1200 agents × 5 steps on a no-op host vs bare Temporal, where the cost over it goes (attribution), recovery under 5% tool failure, 127-step replay (docs/BENCHMARKS.md)
	AGENTFLOW_LOAD=1 $(GO) test -count=1 -tags load -timeout 60m -run 'TestLoad|TestReplayLongHistory' -v ./bench/

.PHONY: chaos
chaos: temporal images ## chaos suite at issue 11's sizes: faults end to end (110 runs at once), a 1,000-run burst, chaos at scale (1,200 agents, kill -9 every 30 s, a 60 s Temporal outage); make test runs the e2e part smaller
	minio=$$(scripts/test-servers.sh minio) && AGENTFLOW_MINIO=$$minio AGENTFLOW_CHAOS_FULL=1 AGENTFLOW_REQUIRE_DOCKER=1 \
	  $(GO) test -count=1 -tags e2e -timeout 60m -run 'TestChaos|TestEngineWorkerKill9' -v ./tests/
	AGENTFLOW_LOAD=1 AGENTFLOW_BURST_AGENTS=1000 $(GO) test -count=1 -tags load -timeout 60m -run 'TestChaosAtScale|TestLoadBurst' -v ./bench/

.PHONY: fuzz
fuzz: ## run the fuzz targets for FUZZTIME each (default 2m)
	$(GO) test -run '^$$' -fuzz FuzzParseEval -fuzztime $${FUZZTIME:-2m} ./internal/expr
	$(GO) test -run '^$$' -fuzz FuzzLoad -fuzztime $${FUZZTIME:-2m} ./internal/spec

# STORE=minio: make up also starts MinIO and the worker uses it (--store).
STORE ?=
# TEMPORAL=postgres: make up runs the full Temporal server on PostgreSQL
# (scripts/test-servers.sh temporal-server; Debian's postgresql) instead of
# the dev server.
TEMPORAL ?=

.PHONY: up
up: build temporal images ## start the Temporal dev server + one worker in the background (STORE=minio: + MinIO as the store; TEMPORAL=postgres: the full server on PostgreSQL)
	STORE=$(STORE) TEMPORAL_DB=$(or $(TEMPORAL),dev) ./scripts/dev.sh up

.PHONY: down
down: ## stop what make up started
	./scripts/dev.sh down

.PHONY: run
run: up ## bring everything up and run the demo spec end to end
	./scripts/demo.sh

COMPOSE_DIR ?= .data/compose
COMPOSE = docker-compose --env-file $(COMPOSE_DIR)/env

.PHONY: compose-up
compose-up: build temporal images ## the production-shaped stack as containers (docker-compose.yml: PostgreSQL, Temporal server + Web UI, MinIO, two workers, Prometheus); every image built locally
	./deploy/build-images.sh all
	./deploy/compose-env.sh $(COMPOSE_DIR)
	$(COMPOSE) up -d

.PHONY: compose-demo
compose-demo: ## run the demo spec through the compose stack (after make compose-up)
	TEMPORAL_ADDRESS=127.0.0.1:$${TEMPORAL_PORT:-7233} DEMO_STOP="make compose-down" ./scripts/demo.sh

.PHONY: compose-down
compose-down: ## stop the docker-compose stack (its volumes stay; docker-compose down -v removes them)
	$(COMPOSE) down

.PHONY: schema
schema: ## regenerate schema/agentflow.schema.json from the Go types
	$(GO) generate ./internal/spec/...

.PHONY: clean
clean: down ## stop services, remove bin/ and .data/
	rm -rf $(BIN) $(DATA)
