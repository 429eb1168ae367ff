# baton's build and test entry points. `make test` is what CI runs (.ci/run).
GO ?= go
PKGS := ./...

.PHONY: test redis-server gcc chromium fmt-check vet unit fuzz build dev bench-lock chaos soak

## test: gofmt check, go vet, and the whole suite with -race against real redis-server processes
test: redis-server gcc chromium fmt-check vet unit

## redis-server: make sure a redis-server binary exists (tests start their own on free ports)
redis-server:
	@if command -v redis-server >/dev/null 2>&1 || [ -n "$$BATON_REDIS_SERVER" ]; then \
		:; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "redis-server missing: installing it with apt-get"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; \
	else \
		echo "redis-server is required for the tests: install it (Debian/Ubuntu: sudo apt-get install -y redis-server; macOS: brew install redis) or point BATON_REDIS_SERVER at a redis-server binary" >&2; \
		exit 1; \
	fi
	@# the tests start their own servers; a distribution's service is not used
	@redis-server --version

## gcc: the clock-step tests build an LD_PRELOAD shim for redis-server's clock; installed when missing and root
gcc:
	@if command -v gcc >/dev/null 2>&1 || command -v cc >/dev/null 2>&1 || [ -n "$$CC" ]; then \
		:; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "gcc missing: installing it with apt-get (for the clock-step tests)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gcc libc6-dev >/dev/null; \
	else \
		echo "gcc not found: the clock-step tests are skipped (install gcc or set CC)"; \
	fi

## chromium: the dashboard test drives Debian's headless Chromium; installed when missing and root
chromium:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || [ -n "$$BATON_CHROMIUM" ]; then \
		:; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "chromium missing: installing it with apt-get (for the dashboard test)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; \
	else \
		echo "chromium not found: the dashboard test is skipped (install Debian's chromium or set BATON_CHROMIUM)"; \
	fi

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)
	$(GO) vet -tags dev,nootlp ./cmd/baton ./otlpenv

## unit: four test binaries at a time (go's default is one per core): the long packages mostly
## wait on real time (processes, leases, quarantines), so they overlap well even on 2 cores
## UNITVET: the vet checks go test runs on each test package before its tests; `make test` ran
## the whole of go vet on the same packages (test files included) just before, so its unit run
## leaves them out (-vet=off): they cost each of some 50 test packages a type-check under load
UNITVET ?=
test: UNITVET = -vet=off
unit:
	$(GO) test -race -count=1 -p 4 -timeout 12m $(UNITVET) $(PKGS)
	$(GO) test -count=1 $(UNITVET) -tags nootlp ./otlpenv

## fuzz: each fuzz target for FUZZTIME (default 1m) beyond its committed seeds, which `unit` (and
## so `make test`) runs: the config loader, the schedule parser with DST, the HTTP API, the baton
## lock command line. Not part of `make test`: a few seconds a target found nothing the seeds do
## not, and cost two minutes of a 2-core run; run it before a release and after parser changes
FUZZTIME ?= 1m
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME) ./config
	$(GO) test -run '^$$' -fuzz '^FuzzSchedule$$' -fuzztime $(FUZZTIME) ./scheduler
	$(GO) test -run '^$$' -fuzz '^FuzzAPI$$' -fuzztime $(FUZZTIME) ./batonhttp
	$(GO) test -run '^$$' -fuzz '^FuzzParseLock$$' -fuzztime $(FUZZTIME) ./cmd/baton

build:
	$(GO) build -o bin/baton ./cmd/baton

## dev: baton dev (embedded Redis + 3 replicas); the embedded server needs the dev build tag, and
## nootlp leaves the OTLP exporters (and gRPC) out of its first build: a dev run exports no traces.
## DEVGCFLAGS builds it without the optimizer and inlining: a first build (empty caches) takes
## 0.63 of the time (docs/operating.md), and a dev run needs no speed; DEVGCFLAGS= builds as usual
DEVGCFLAGS ?= all=-N -l
dev:
	$(GO) run -tags dev,nootlp -gcflags='$(DEVGCFLAGS)' ./cmd/baton dev

## chaos: the multi-process run under random faults for BATON_CHAOS (default 3m; not in CI, which runs
## a 15 s variant inside `unit`); replay a run with the BATON_CHAOS_SEED it printed
chaos: redis-server
	BATON_CHAOS=$${BATON_CHAOS:-3m} $(GO) test -count=1 -run '^TestChaos$$' -v -timeout 30m ./internal/e2e

## soak: baton as deployed, for BATON_SOAK (default 30m): three `baton run` processes, a queue Redis
## and three lock masters on loopback; 500 job-list jobs every 15-60 s, 10,000 runtime schedules (one
## in five due every 5 minutes) put at the start and put, replaced or deleted five a second all
## along; the third replica restarted every 5 minutes, a lock master once. Each replica's RSS,
## goroutines and live heap, and each Redis's used_memory, may grow at most 5 % from minute 10 to 30
## (medians of the 3 minutes before each), and the ledger must account for every tick
## (TestSoakReplicas). Without -race: the race detector's own memory and CPU would be what it
## measures. The suite runs it with -race for 10 s on a smaller load, beside the in-process soak of
## the scheduler and the lock client (TestSoak: BATON_SOAK=3m BATON_SOAK_JOBS=10000 go test -run
## '^TestSoak$' ./internal/soak runs it for minutes)
soak: redis-server
	BATON_SOAK=$${BATON_SOAK:-30m} $(GO) test -count=1 -run '^TestSoakReplicas$$' -v -timeout 50m ./internal/soak

## bench-lock: the lock benchmark against peer libraries (writes bench/results/locking.md)
bench-lock:
	cd bench && $(GO) run ./cmd/lockbench
