GO ?= go
BIN := bin/idemrun

.PHONY: all build test vet fmt fmt-check demo chaos bench fuzz cli-doc clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/idemrun

## test: the whole suite with the race detector (fuzz seed corpora included).
test:
	$(GO) test -race -timeout 15m ./...

## vet: go vet here, and for macOS and Windows (the build and the tests compile there).
vet:
	$(GO) vet ./...
	GOOS=darwin $(GO) vet ./...
	GOOS=windows $(GO) vet ./...

fmt:
	gofmt -w .

fmt-check:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## demo: fake payments target with faults, 1,000 jobs, runner killed with SIGKILL mid-run.
demo: build
	./$(BIN) demo

## chaos: a longer kill -9 run; override with make chaos CHAOS_FLAGS="--jobs 2000 --kills 30".
CHAOS_FLAGS ?= --jobs 1000 --kills 20
chaos: build
	./$(BIN) demo --chaos $(CHAOS_FLAGS)

## bench: throughput figures (see BENCHMARKS.md).
BENCH_FLAGS ?= --jobs 50000 --workers 100
bench: build
	./$(BIN) bench $(BENCH_FLAGS)

## fuzz: run every fuzz target for FUZZTIME each.
FUZZTIME ?= 60s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for t in $$($(GO) test -list 'Fuzz.*' $$pkg | grep -E '^Fuzz'); do \
	    echo "== $$pkg $$t"; $(GO) test -run='^$$' -fuzz="^$$t$$" -fuzztime=$(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

## cli-doc: write docs/cli.md from the commands' own help (a test fails while it is stale).
cli-doc:
	$(GO) run ./internal/clidoc

clean:
	rm -rf bin
