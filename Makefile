# The two commands a new user needs are `make run` and `make test`.
GO       ?= go
# Build tools (buf, its plugins, staticcheck) are pinned in their own module.
TOOL     := $(GO) tool -modfile=tools/go.mod
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
BENCH_RUNS    ?= 5
BENCH_RECORDS ?= 3000000
# Rounds of the side-by-side comparison with Conduit (0 skips it).
BENCH_VS_CONDUIT ?= 3

.PHONY: run build test test-deps lint generate bench screenshots clean

## run: build and run conduit with ./conduit.yml and the pipelines in ./pipelines (example, and blip which fails and heals; Badger state in ./conduit.db)
run: build
	./bin/conduit run

## build: build bin/conduit and the example standalone connector (connectors/flaky, found through connectors.path)
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/conduit ./cmd/conduit
	$(GO) build -o connectors/flaky ./examples/connectors/flaky

## test: all tests with the race detector, after test-deps (a fresh machine's first run also
## builds Conduit's CLI and compiles the test WASM processor, minutes each, then cached)
test: test-deps
	$(GO) test -race -count=1 -p 4 -parallel 4 -timeout 30m ./...

## test-deps: what the tests need besides Go: as root on Debian installs PostgreSQL, Chromium and promtool
## when missing and starts the machine's PostgreSQL; otherwise says what to install and fails
test-deps:
	GO=$(GO) bash tools/test-deps.sh

## lint: gofmt check, go vet, staticcheck, buf lint, and a check that pkg/api/gen matches proto/
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(TOOL) staticcheck ./...
	$(TOOL) buf lint proto
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(TOOL) buf generate --template proto/buf.gen.yaml -o "$$tmp" || exit 1; \
	if ! diff -r "$$tmp/pkg/api/gen" pkg/api/gen; then echo "generated code is stale: run make generate"; exit 1; fi

## generate: regenerate the API code in pkg/api/gen from proto/ (buf and plugins pinned in tools/go.mod)
generate:
	$(TOOL) buf generate --template proto/buf.gen.yaml

## bench: Go benchmarks of the hot path and the audit log, then throughput, side by side with Conduit, and the fault storm end to end
bench:
	$(GO) test -run='^$$' -bench=. -benchmem -count=1 ./pkg/record/ ./pkg/connector/ ./pkg/pipeline/
	$(GO) test -run='^$$' -bench=. -benchtime=3s -count=1 ./auditlog/
	@echo "audit log targets: AppendDurable64 measured, no target (a state and its event stay in one commit; the fault storm figures must not get worse); ListLast100 p99-ms <= 5; WatchFanout100 p99 <= 10 ms"
	@echo "side by side with Conduit (builds Conduit v0.14.0 once into the user's cache): targets json records/s ratio >= 5; snapshot peak RSS ratio <= 1; cdc p50 ratio <= 1 and our p99 < 20 ms"
	$(GO) run ./cmd/conduit-bench -runs $(BENCH_RUNS) -records $(BENCH_RECORDS) -vs-conduit $(BENCH_VS_CONDUIT)

## screenshots: the web console's screenshots in docs/images, taken by its browser test
screenshots:
	mkdir -p docs/images
	CONDUIT_TEST_CONSOLE_SCREENSHOTS=$(CURDIR)/docs/images $(GO) test -count=1 -run TestConsoleShowsRecoveryAndStops ./cmd/conduit/

clean:
	rm -rf bin connectors conduit.db example.out blip.out
