# httpretry's developer commands. `make test` is what CI runs.

GO          ?= go
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
BENCHSTAT   ?= $(GO) run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
GREMLINS    ?= $(GO) run github.com/go-gremlins/gremlins/cmd/gremlins@v0.6.0

# Every module: the library at the root, and the benchmarks against other
# libraries in bench/ (its own go.mod, so their dependencies stay out of
# the library's).
MODULES := . bench

# Modules whose tests run without -race: the SDK examples test wiring, not
# concurrency, and the SDKs build far slower under the race detector.
EXAMPLE_MODULES := examples/sdks

.PHONY: test vet lint race examples demo bench storm fuzz mutate

## test: go vet, staticcheck and race-enabled tests of every module, then the examples
test: vet lint race examples

vet:
	@for m in $(MODULES); do echo "go vet ($$m)"; (cd $$m && $(GO) vet ./...) || exit 1; done

lint:
	@for m in $(MODULES); do echo "staticcheck ($$m)"; (cd $$m && $(STATICCHECK) ./...) || exit 1; done

race:
	@for m in $(MODULES); do echo "go test -race ($$m)"; (cd $$m && $(GO) test -race -count=1 ./...) || exit 1; done

## examples: go vet, staticcheck and go test (no -race) of the example modules
examples:
	@for m in $(EXAMPLE_MODULES); do echo "go vet, staticcheck, go test ($$m)"; (cd $$m && $(GO) vet ./... && $(STATICCHECK) ./... && $(GO) test -count=1 ./...) || exit 1; done

## demo: a local flaky server and a client whose retries show in the output
demo:
	$(GO) run ./examples/demo

## bench: success-path overhead and peers, interleaved runs, benchstat tables
bench:
	@rm -f /tmp/httpretry-bench-root.txt /tmp/httpretry-bench-peers.txt
	$(GO) test -c -o /tmp/httpretry-bench-root.test .
	cd bench && $(GO) test -c -o /tmp/httpretry-bench-peers.test .
	@for i in 1 2 3 4 5 6; do \
		/tmp/httpretry-bench-root.test -test.run '^$$' -test.bench 'RoundTrip|Budget' -test.benchmem >> /tmp/httpretry-bench-root.txt || exit 1; \
		/tmp/httpretry-bench-peers.test -test.run '^$$' -test.bench . -test.benchmem >> /tmp/httpretry-bench-peers.txt || exit 1; \
	done
	$(BENCHSTAT) /tmp/httpretry-bench-root.txt
	sed -E 's#^(BenchmarkPeers[A-Za-z]*)/([a-z]+)/([a-z]+)-#\1/case=\2/impl=\3-#' /tmp/httpretry-bench-peers.txt | $(BENCHSTAT) -col /impl -

## storm: the retry-storm simulator; writes docs/storm/
storm:
	cd bench && $(GO) run ./storm -out ../docs/storm

## fuzz: a bounded fuzzing run of each target (the seed corpus runs in make test)
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParseRetryAfter$$' -fuzztime 30s .
	$(GO) test -run '^$$' -fuzz '^FuzzTransport$$' -fuzztime 30s .

## mutate: mutation testing of the root package (slow; not part of CI)
mutate:
	$(GREMLINS) unleash --tags mutation --workers 2 -E 'httptestutil/' -E 'examples/' -E 'bench/' .
