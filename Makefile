# httpretry's developer commands. `make test` is what CI runs.

GO          ?= go
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: test vet lint race demo bench

## test: vet, staticcheck and the race-enabled tests of every module
test: vet lint race

vet:
	$(GO) vet ./...

lint:
	$(STATICCHECK) ./...

race:
	$(GO) test -race -count=1 ./...

## demo: a local flaky server and a client whose retries show in the output
demo:
	$(GO) run ./examples/demo

## bench: the success-path overhead, in memory and on loopback
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count=5 .
