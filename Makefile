# ScootGate — `make help` lists the targets.
GO      ?= go
PKGS    ?= ./...
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

.DEFAULT_GOAL := check

.PHONY: help run build test check fmt-check vet lint race bench fuzz tidy-check crash-loop soak

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

# run builds first and says so: a cold `go run` compiles for minutes
# without a word (README.md "First run"). The binary goes to bin/, which
# is git-ignored.
run: ## build bin/scootgate-dev, then start the dev stack: fake provider + SOCKS5 egress + node on 127.0.0.1:8080
	@echo "building the dev stack into bin/scootgate-dev (a first run downloads modules and compiles: a few minutes on 2 cores)..."
	$(GO) build -o bin/scootgate-dev ./cmd/scootgate-dev
	@echo "starting the dev stack (Ctrl-C stops it)..."
	./bin/scootgate-dev

build: ## build bin/scootgate
	$(GO) build -trimpath -ldflags "-X main.version=$(VERSION)" -o bin/scootgate ./cmd/scootgate

test: vet ## vet, then every test under the race detector (the CI command)
	@echo "testing: building every package with the race detector, then running its tests (a first run compiles for many minutes on 2 cores)..."
	$(GO) test -race -count=1 $(PKGS)

check: fmt-check lint test ## fmt-check + staticcheck + vet + race tests

CRASHLOOP_ROUNDS ?= 12
crash-loop: ## kill -9 the real node under load, 12 rounds, real Mosquitto (needs SCOOTGATE_MOSQUITTO_ADDR; ~1 min)
	SCOOTGATE_CRASHLOOP=1 SCOOTGATE_CRASHLOOP_ROUNDS=$(CRASHLOOP_ROUNDS) $(GO) test -count=1 -timeout 10m -run '^TestCrashLoop$$' -v ./cmd/scootgate/

SOAK_DURATION ?= 10m
soak: ## soak benchmark: mixed load for SOAK_DURATION, broker restarted every minute, routes republished every 10s (docs/performance.md)
	SCOOTGATE_SOAK=1 SCOOTGATE_SOAK_DURATION=$(SOAK_DURATION) $(GO) test -count=1 -timeout 30m -run '^TestSoak$$' -v ./cmd/scootgate/

fmt-check: ## fail if gofmt would change a file
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet: ## go vet
	@echo "vetting: type-checking every package (a first run downloads modules and compiles them: several minutes on 2 cores)..."
	$(GO) vet $(PKGS)

# staticcheck at a pinned version, built by the go command (no install step,
# nothing added to go.mod); bump it together with the Go version.
STATICCHECK_VERSION ?= v0.8.2
lint: ## staticcheck, pinned (STATICCHECK_VERSION)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) $(PKGS)
	$(GO) -C bench run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

race: ## race tests with 1 and 4 procs
	$(GO) test -race -count=1 -cpu 1,4 $(PKGS)

bench: ## hot-path benchmarks with allocations
	$(GO) test -run='^$$' -bench=. -benchmem ./internal/balance ./internal/jsonedit ./internal/sse ./internal/gateway ./internal/provider/... ./internal/authz ./internal/usage ./internal/metrics

FUZZTIME ?= 10s
FUZZMINIMIZE ?= 100x
FUZZMINEXECS ?= 1000
fuzz: ## run every fuzz target for FUZZTIME (minimising for at most FUZZMINIMIZE; fails a target that ran < FUZZMINEXECS inputs)
	GO=$(GO) FUZZTIME=$(FUZZTIME) FUZZMINIMIZE=$(FUZZMINIMIZE) FUZZMINEXECS=$(FUZZMINEXECS) scripts/fuzz.sh

tidy-check: ## fail if go.mod/go.sum (the node's and bench/'s) are not tidy
	$(GO) mod tidy -diff
	$(GO) -C bench mod tidy -diff

LOADFLAGS ?=
FLEETFLAGS ?=
.PHONY: bench-fleet
bench-fleet: ## fleet convergence: 50 node processes, one long-poll control plane, publish → applied (docs/performance.md; FLEETFLAGS=-h)
	$(GO) -C bench run ./cmd/scootgate-load converge $(FLEETFLAGS)

.PHONY: bench-count
# bench-count builds the harness rather than `go run` it: the node under
# callgrind is this binary, and `go run` strips the symbols that
# callgrind_annotate needs to name where the instructions went.
bench-count: ## exact yardstick: instructions (callgrind), system calls and context switches (perf) per request, node vs hop (~40 min; docs/performance.md; COUNTFLAGS=-h)
	$(GO) -C bench build -o $(CURDIR)/bin/scootgate-load ./cmd/scootgate-load
	./bin/scootgate-load count -out $(CURDIR)/bench-results $(COUNTFLAGS)

.PHONY: bench-load
bench-load: ## open-loop load harness, node vs a bare Go proxy hop on three paths (~12 min; docs/performance.md; LOADFLAGS=-h)
	$(GO) -C bench run ./cmd/scootgate-load -out $(CURDIR)/bench-results $(LOADFLAGS)

# The load harness is a module of its own (bench/, the node's through a
# replace directive), so the node's module carries no benchmark tooling.
.PHONY: test-bench
test-bench: ## vet and race-test the load harness module (bench/)
	$(GO) -C bench vet ./...
	$(GO) -C bench test -race -count=1 ./...
