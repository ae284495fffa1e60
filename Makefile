# httpretry's developer commands. `make` alone runs `make check`, the fast
# loop; `make test` is what CI runs.

.DEFAULT_GOAL := check

GO          ?= go
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
BENCHSTAT   ?= $(GO) run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
GREMLINS    ?= $(GO) run github.com/go-gremlins/gremlins/cmd/gremlins@v0.6.0

# Every module: the library at the root, and the benchmarks against other
# libraries in bench/ (its own go.mod, so their dependencies stay out of
# the library's), and contrib modules with heavy dependencies.
MODULES := . bench contrib/promretry contrib/otelretry contrib/redisretry contrib/pgidempotency

GOCYCLO     ?= $(GO) run github.com/fzipp/gocyclo/cmd/gocyclo@v0.6.0
# promtool: the one on PATH, which `make deps` installs from Debian's
# prometheus package (seconds); without one, built from the Go module proxy
# (minutes from a cold cache: it brings Prometheus's dependencies).
PROMTOOL    ?= $(shell command -v promtool 2>/dev/null || echo "$(GO) run github.com/prometheus/prometheus/cmd/promtool@v0.316.0")
# apidiff compares each released module's API with its last tag.
APIDIFF     ?= $(GO) run golang.org/x/exp/cmd/apidiff@v0.0.0-20261113113407-e3970619a1a4

# The modules that are released, each tagged on its own (see
# docs/RELEASING.md); bench and the examples are not.
RELEASE_MODULES := . contrib/promretry contrib/otelretry contrib/redisretry contrib/pgidempotency

# requote brings the lines of the docs that quote a generated file up to
# date with it (internal/figures): every target that writes a figure file
# runs it after writing, so that a doc never quotes an older run than the
# file's (see CONTRIBUTING.md, "Figures").
REQUOTE ?= $(GO) run ./internal/figures/requote

# figure_header prints the first line of a generated figure file: the
# command that wrote it, the date, the commit and the Go version. Every
# figure a doc quotes comes from such a file (see CONTRIBUTING.md).
figure_header = echo "\# $(1), $$(date -u +%Y-%m-%d), commit $$(git rev-parse --short HEAD 2>/dev/null || echo unknown), $$($(GO) version | cut -d' ' -f3-)"

# Modules whose tests run without -race: the SDK examples test wiring, not
# concurrency, and the SDKs build far slower under the race detector.
EXAMPLE_MODULES := examples/sdks

.PHONY: mutate-root mutate-throttle check test deps vet cross lint lint-examples cyclo race examples rules apicheck demo bench storm storm-fleet throttle hedge spread fuzz mutate faultmatrix layers ci-time

## check: the fast loop, under a minute on a warm cache: gofmt (fails on
## any file it would change), go vet, and race-enabled short tests of the
## root package and the idempotency packages (-short skips the tests that
## wait seconds of real time; make test runs them)
check:
	@echo "gofmt -l"
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
		if [ -n "$$out" ]; then echo "not formatted (run gofmt -w):"; echo "$$out"; exit 1; fi
	@echo "go vet (. ./idempotency/...)"
	@$(GO) vet . ./idempotency/...
	@echo "go test -race -short (. ./idempotency/...)"
	@$(GO) test -race -short . ./idempotency/...


## test: go vet (for this platform, then cross-compiled), staticcheck,
## gocyclo and race-enabled tests of every module (bench with -short),
## then the Prometheus rules, the API check and the figures check. The SDK examples (make
## examples), their staticcheck (make lint-examples) and the Redis failover
## drills (make redis-drills) are CI steps of their own after it, for make
## test's time goal: .ci/run runs all four
test: deps vet cross lint cyclo race rules apicheck figures-check

## deps: programs the tests start: redis-server, redis-cli (Cluster set-up)
## and redis-sentinel (contrib/redisretry, the fleet storm), promtool
## (make rules), PostgreSQL's initdb, pg_ctl and postgres (under
## /usr/lib/postgresql/*/bin) and pgbouncer (contrib/pgidempotency), and
## nginx (the throttle behind a proxy: the root's tests and make
## throttle). Installs the Debian packages with apt-get where it can;
## otherwise says how (promtool is then built from the Go module proxy).
## The packages' own services are stopped and disabled: the tests start
## their own servers on free ports.
REDIS_PROGRAMS := redis-server redis-cli redis-sentinel
deps:
	@missing=; for p in $(REDIS_PROGRAMS) promtool pgbouncer nginx; do command -v $$p >/dev/null 2>&1 || [ -x /usr/sbin/$$p ] || missing="$$missing $$p"; done; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || missing="$$missing initdb"; \
	if [ -n "$$missing" ]; then \
		if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then SUDO=; \
		elif command -v apt-get >/dev/null 2>&1 && command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; \
		elif [ "$$missing" = " promtool" ]; then exit 0; \
		else echo "not on PATH:$$missing, and cannot be installed here: install the redis-server, redis-tools, redis-sentinel, postgresql, pgbouncer and nginx-light packages (on macOS brew install redis prometheus postgresql pgbouncer nginx)" >&2; exit 1; fi; \
		echo "installing redis-server redis-tools redis-sentinel prometheus postgresql pgbouncer nginx-light (missing:$$missing)"; \
		$$SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y --no-install-recommends redis-server redis-tools redis-sentinel prometheus postgresql pgbouncer nginx-light || exit 1; \
		for s in redis-server redis-sentinel prometheus postgresql pgbouncer nginx; do ($$SUDO systemctl disable --now $$s || $$SUDO service $$s stop) >/dev/null 2>&1 || true; done; \
		for p in $(REDIS_PROGRAMS) nginx; do command -v $$p >/dev/null 2>&1 || [ -x /usr/sbin/$$p ] || { echo "$$p still not on PATH after installing the Debian packages" >&2; exit 1; }; done; \
		ls /usr/lib/postgresql/*/bin/initdb /usr/lib/postgresql/*/bin/pg_ctl /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || { echo "initdb, pg_ctl or postgres still missing under /usr/lib/postgresql/*/bin after installing postgresql" >&2; exit 1; }; \
		[ -x /usr/sbin/pgbouncer ] || command -v pgbouncer >/dev/null 2>&1 || { echo "pgbouncer still missing after installing the Debian package" >&2; exit 1; }; \
	fi

## vet: go vet in every module, and of the root package under the
## mutation build tag that make mutate builds with (it leaves out the slow
## real-network tests), so that a helper those tests share cannot go
## missing from the mutated build unnoticed
vet:
	@for m in $(MODULES); do echo "go vet ($$m)"; (cd $$m && $(GO) vet ./...) || exit 1; done
	@echo "go vet -tags mutation (.)"
	@$(GO) vet -tags mutation .

## cross: go vet for Windows of the modules with files for some
## platforms only (CROSS_MODULES): Windows builds other files than Linux
## (classify_windows.go). The other released modules are the same code on
## every platform, and the step fails when one of them gains such a file
## (a _windows.go, _unix.go, … name or a //go:build line), so that it is
## added to CROSS_MODULES. macOS builds the same files as Linux (the unix
## and !windows ones, which make vet checks), so for it, and for bench and
## the examples on Windows, `go list -deps -test` checks that every
## package and dependency, tests included, has files for the platform and
## that every import resolves: vetting would compile the standard library
## (and every SDK) once more, minutes from a cold cache. Once a file names
## Linux or macOS alone (a _linux.go name, a //go:build darwin line),
## macOS is vetted too.
CROSS_MODULES := . contrib/redisretry contrib/pgidempotency
PLATFORMS := aix|android|darwin|dragonfly|freebsd|hurd|illumos|ios|js|linux|netbsd|openbsd|plan9|solaris|wasip1|windows|unix|other
cross:
	@for m in $(filter-out $(CROSS_MODULES),$(RELEASE_MODULES)); do \
		out=$$(cd $$m && { git ls-files '*.go' | grep -E "_($(PLATFORMS))(_test)?\.go$$"; git grep -lE "^//go:build.*\b($(PLATFORMS))\b" -- '*.go'; } | sort -u); \
		if [ -n "$$out" ]; then echo "$$m has files for some platforms only; add it to CROSS_MODULES:"; echo "$$out"; exit 1; fi; \
	done
	@vet=windows; \
	if git ls-files '*.go' | grep -qE '_(linux|darwin)(_test)?\.go$$' || git grep -qE '^//go:build.*\b(linux|darwin)\b' -- '*.go'; then vet="windows darwin"; fi; \
	for os in $$vet; do \
		for m in $(CROSS_MODULES); do echo "GOOS=$$os go vet ($$m)"; (cd $$m && GOOS=$$os $(GO) vet ./...) || exit 1; done; \
	done; \
	for os in windows darwin; do \
		for m in $(MODULES) $(EXAMPLE_MODULES); do echo "GOOS=$$os go list -deps -test ($$m)"; \
			(cd $$m && GOOS=$$os $(GO) list -e -deps -test -f '{{if .Error}}{{.ImportPath}}: {{.Error}}{{end}}{{range .DepsErrors}}{{.}}{{end}}' $$($(GO) list ./...) | sort -u | grep . && exit 1 || true) || exit 1; done; \
	done

lint:
	@for m in $(MODULES); do echo "staticcheck ($$m)"; (cd $$m && $(STATICCHECK) ./...) || exit 1; done

## cyclo: no library function above cyclomatic complexity 15 (tests,
## benchmarks and examples excluded)
cyclo:
	@echo "gocyclo -over 15 (library code)"
	@files=$$(git ls-files '*.go' 2>/dev/null | grep -vE '_test\.go$$|^bench/|(^|/)examples/|/testdata/' || find . -name '*.go' ! -name '*_test.go' ! -path './bench/*' ! -path '*/examples/*' ! -path '*/testdata/*'); \
		out=$$($(GOCYCLO) -over 15 $$files) || { echo "$$out"; exit 1; }

## race: every module's tests under -race (bench's with -short), through
## scripts/gotest.sh, whose failing log ends with the failures, the tests
## running at a timeout and the test code its blocked goroutines were in
race: deps
	@for m in $(MODULES); do short=; [ $$m = bench ] && short=-short; \
		echo "go test -race $$short ($$m)"; (cd $$m && GO="$(GO)" $(CURDIR)/scripts/gotest.sh -race -count=1 $$short ./...) || exit 1; done

## redis-drills: contrib/redisretry's failover drills (build tag drills),
## real servers killed and failed over under traffic: a Cluster master
## killed mid-traffic, Sentinel failovers with and without WaitReplicas,
## a two-replica Sentinel switchover and a two-replica Cluster forced
## failover, payments through a two-replica switchover (a few minutes)
redis-drills: deps
	@echo "go test -race -tags drills (contrib/redisretry: the drills, and the harness's failover tests)"
	@cd contrib/redisretry && $(GO) vet -tags drills ./... && \
		$(GO) test -race -count=1 -tags drills -run '^TestDrill' . && \
		$(GO) test -race -count=1 -tags drills -run '^(TestClusterKillMasterPromotesReplica|TestSentinelReportsPrimaryAndFailsOver|TestSentinelWithTwoReplicasFailsOverToOneOfThem)$$' ./redistest

## rules: promtool checks promretry's recording and alerting rules and
## runs their unit tests
rules: deps
	@echo "promtool check rules, test rules (contrib/promretry/rules)"
	@cd contrib/promretry/rules && $(PROMTOOL) check rules httpretry.rules.yml && $(PROMTOOL) test rules httpretry.rules.test.yml

## apicheck: each released module's exported API against its last tag
## (tags such as contrib/redisretry/v0.1.0 for contrib/redisretry); fails
## on an incompatible change. A module not yet tagged (none is yet) has an
## API that is all new: the check says so and checks nothing for it
apicheck:
	@bash scripts/apicheck.sh "$(APIDIFF)" $(RELEASE_MODULES)

## examples: go vet and go test (no -race) of the example modules, a
## step of its own in CI (.ci/run) after make test: the SDKs they import
## take a minute and a half to build from a cold cache
examples:
	@for m in $(EXAMPLE_MODULES); do echo "go vet, go test ($$m)"; (cd $$m && $(GO) vet ./... && $(GO) test -count=1 ./...) || exit 1; done

## lint-examples: staticcheck of the example modules, a step of its own in
## CI (.ci/run) after make test: staticcheck analyses every SDK the
## examples import, minutes from a cold cache
lint-examples:
	@for m in $(EXAMPLE_MODULES); do echo "staticcheck ($$m)"; (cd $$m && $(STATICCHECK) ./...) || exit 1; done

## demo: a local flaky server and a client whose retries show in the output
demo:
	$(GO) run ./examples/demo

.PHONY: demo-metrics brownout-chart demo-payments demo-payments-pg redis-drills redis-failover

## redis-failover: failovers during reservations (Sentinel with one
## replica and with two, a Cluster with two replicas per master), with
## IdempotencyOptions.WaitReplicas from 0 to the replica count:
## reservations acknowledged and lost, and Reserve's latency with and
## without the wait; then the fleet budget on an evicting Redis, through
## Cluster failovers, and its commands per failing operation by rate and
## in a burst. Writes docs/redis-failover.txt (10 to 20 minutes)
redis-failover: deps
	@{ $(call figure_header,make redis-failover); \
	  cd contrib/redisretry && $(GO) run ./examples/failover -runs 3 && $(GO) run ./examples/budgetdrills -runs 3; } | tee docs/redis-failover.txt.tmp; \
	if [ "$$(grep -c '^OK' docs/redis-failover.txt.tmp)" -ge 2 ]; then mv docs/redis-failover.txt.tmp docs/redis-failover.txt; else rm -f docs/redis-failover.txt.tmp; exit 1; fi; \
	$(REQUOTE)

## demo-payments: 10,000 orders through httpretry, a fault injector and two
## payment-service instances sharing a Redis idempotency store (its own
## redis-server on a free loopback port); prints charges, replays, conflicts;
## then the same with 5% of Redis replies lost after Redis ran the command;
## then the same with the store on a Redis Cluster of three masters; then
## on a primary with two replicas behind sentinels, WaitReplicas 2,
## switched over mid-run. Writes docs/payments.txt (a few minutes) and
## requotes the docs that quote it. PAYMENTS_ORDERS sets the orders per
## run (figures-check runs fewer).
PAYMENTS_ORDERS ?= 10000
demo-payments: deps
	@{ $(call figure_header,make demo-payments); \
	  cd contrib/redisretry && $(GO) run ./examples/payments -orders $(PAYMENTS_ORDERS) -lost-replies 5 -cluster -switchover; } | tee docs/payments.txt.tmp; \
	rc=$$?; if grep -q '^OK' docs/payments.txt.tmp; then mv docs/payments.txt.tmp docs/payments.txt; else rm -f docs/payments.txt.tmp; exit 1; fi; \
	$(REQUOTE)

## demo-payments-pg: the exactly-once proof on PostgreSQL: 20,000 orders,
## ten concurrent duplicates each, through httpretry to two instances of
## a payment service sharing one PostgreSQL (its own, on a free loopback
## port), killed before and after COMMIT, with 5% of COMMIT
## acknowledgements lost, 1% of database connections reset and handler
## runs stalled past their lock. Writes docs/payments-pg.txt (a few
## minutes)
demo-payments-pg: deps
	@{ $(call figure_header,make demo-payments-pg); \
	  cd contrib/pgidempotency && $(GO) run ./examples/paymentspg -orders 20000; } | tee docs/payments-pg.txt.tmp; \
	if grep -q ' 0 charged twice, 0 lost responses,' docs/payments-pg.txt.tmp; then mv docs/payments-pg.txt.tmp docs/payments-pg.txt; else rm -f docs/payments-pg.txt.tmp; exit 1; fi; \
	$(REQUOTE)

## demo-metrics: the flaky demo service and a client instrumented with
## promretry for 10 s, /metrics on loopback; prints the key series
demo-metrics:
	cd contrib/promretry && $(GO) run ./examples/observability -duration 10s

## brownout-chart: a 30 s brownout run of the same demo, first-attempt
## success split by result; writes
## docs/observability/brownout.svg and brownout.csv from its metrics
brownout-chart:
	@mkdir -p docs/observability
	cd contrib/promretry && $(GO) run ./examples/observability -brownout -duration 30s \
		-csv ../../docs/observability/brownout.csv -svg ../../docs/observability/brownout.svg

## bench: success-path overhead and peers, benchstat tables; writes
## docs/bench/root.txt (the root's benchmarks, old against new: a test
## binary built from BENCH_OLD and one from the working tree, run
## alternately BENCH_ROUNDS times) and docs/bench/peers.txt (about 10 min)
BENCH_OLD    ?= ae372f7
BENCH_ROUNDS ?= 6
bench:
	GO="$(GO)" bash scripts/bench.sh "$(BENCH_OLD)" "$(BENCH_ROUNDS)" $(BENCHSTAT)

## storm: the retry-storm simulator; writes docs/storm/
storm: deps
	cd bench && $(GO) run ./storm -out ../docs/storm
	$(REQUOTE)

## hedge: the hedging scenarios (independent and correlated slowness,
## zero configuration), httpretry's hedging beside failsafe-go and
## hedgedhttp on the same arrivals; writes docs/storm/hedging.txt and
## docs/storm/hedging.svg and prints one line per target (about 7 min)
hedge:
	@{ $(call figure_header,make hedge); (cd bench && $(GO) run ./storm -scenarios hedging -out ../docs/storm); } > docs/storm/hedging.txt.tmp; \
	rc=$$?; if [ $$rc -ne 0 ]; then rm -f docs/storm/hedging.txt.tmp; exit $$rc; fi; \
	mv docs/storm/hedging.txt.tmp docs/storm/hedging.txt; grep '^hedging:' docs/storm/hedging.txt; \
	$(REQUOTE)

## spread: where retries and hedges go when a hostname resolves to four
## addresses: backends on 127.0.0.2-127.0.0.5 over HTTP/1.1 and HTTP/2
## with TLS, one failing and then one slow, httpretry today beside
## httpretry over spread.Transport on the same arrivals; writes
## docs/storm/spread.md and prints its "spread:" line (about a minute and
## a half). It fails when a target is missed, and keeps the file.
spread:
	@{ $(call figure_header,make spread); echo; (cd bench && $(GO) run ./spread); } > docs/storm/spread.md.tmp; \
	rc=$$?; if ! grep -q '^spread:' docs/storm/spread.md.tmp; then rm -f docs/storm/spread.md.tmp; exit 1; fi; \
	mv docs/storm/spread.md.tmp docs/storm/spread.md; grep '^spread:' docs/storm/spread.md; exit $$rc

## storm-fleet: only the fleet scenario, printed; writes no files
storm-fleet: deps
	cd bench && $(GO) run ./storm -scenarios fleet -out ""

## throttle: the overload scenarios of the storm simulator (outage,
## brownout, metastable overload, two hosts, quota, fleet, an outage
## behind nginx, low-rate callers, a server that sheds retries) for the
## throttle, per-host budgets, quota pacing and the Shedder; prints one
## line per scenario and writes docs/storm/throttle.md, throttle-outage.svg
## and metastable.svg (about 10 min)
throttle: deps
	cd bench && $(GO) run ./storm -scenarios throttle -out ../docs/storm
	$(REQUOTE)

## fuzz: a bounded fuzzing run of each target (the seed corpus runs in make test)
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParseRetryAfter$$' -fuzztime 30s .
	$(GO) test -run '^$$' -fuzz '^FuzzParseRetryAfterMs$$' -fuzztime 30s .
	$(GO) test -run '^$$' -fuzz '^FuzzParseRateLimit$$' -fuzztime 30s .
	$(GO) test -run '^$$' -fuzz '^FuzzTransport$$' -fuzztime 30s .

## mutate: mutation testing of the root package (make mutate-root:
## writes docs/mutation.txt; about an hour on a 2-core machine) and
## of the throttle package (make mutate-throttle: writes
## docs/mutation-throttle.txt, 16 to 35 minutes); not part of CI, which
## vets its build. gremlins reads the package's files as it goes: run it
## in a checkout nothing edits until it ends (git worktree add), or the
## mutants of a file changed meanwhile are placed by the old coverage. The mutation build tag leaves out the fault matrix, the
## load test and every test that waits real time (realTime in
## realtime_test.go): each mutant rebuilds and runs the suite, which then
## takes about a second instead of fifty. gremlins runs only the mutated
## package's own tests, so each package's rules are held by its own
## tests; spread/ and the rest are held by their own tests too. Each
## target writes its file once it passes
## (the tests it runs read that file: it is written whole, at the end) and
## fails below 95% test efficacy or 95% mutator coverage. Each mutant's
## tests may run for three times as long as the whole first run took
## (gremlins' rule), so that run must not come from the test cache:
## -count=1.
MUTATE_THRESHOLD := 95
MUTATE_EXCLUDE := -E 'httptestutil/' -E 'examples/' -E 'bench/' -E 'idempotency/' -E 'internal/' -E 'contrib/' -E 'spread/'
# mutation_met(file): the run in file reports both figures, each at least
# MUTATE_THRESHOLD (gremlins v0.6.0 may exit 0 below its thresholds)
mutation_met = awk -v t=$(MUTATE_THRESHOLD) '/^(Test efficacy|Mutator coverage):/ { v = $$NF; sub("%", "", v); n++; if (v + 0 < t) { print "below " t "%: " $$0; bad = 1 } } END { exit !(n == 2 && !bad) }' $(1)
# mutation_run(target, output file, extra exclusions)
mutation_run = { $(call figure_header,make $(1)); \
	  GOFLAGS=-count=1 $(GREMLINS) unleash --tags mutation --workers 2 --threshold-efficacy $(MUTATE_THRESHOLD) --threshold-mcover $(MUTATE_THRESHOLD) \
	    $(MUTATE_EXCLUDE) $(3) . 2>&1; \
	  echo "gremlins exit $$?"; } | tee $(2).tmp; \
	if grep -q '^gremlins exit 0$$' $(2).tmp && $(call mutation_met,$(2).tmp); then mv $(2).tmp $(2); else rm -f $(2).tmp; exit 1; fi; \
	$(REQUOTE)
mutate: mutate-root mutate-throttle
mutate-root:
	@$(call mutation_run,mutate-root,docs/mutation.txt,-E 'throttle/')
mutate-throttle:
	@$(call mutation_run,mutate-throttle,docs/mutation-throttle.txt,-E '^[a-z_0-9]+\.go$$')

## faultmatrix: the fault matrix, every cell as a table line; writes
## docs/faultmatrix.txt (a few minutes under -race)
faultmatrix:
	@{ $(call figure_header,make faultmatrix); \
	  $(GO) test -race -count=1 -run '^TestFaultMatrix$$' -v . 2>&1; } | tee docs/faultmatrix.txt; ! grep -q '^--- FAIL' docs/faultmatrix.txt && \
	$(REQUOTE)

## layers: the retry-at-one-layer chain, the deadline propagated through
## it, and net/http's hidden resends bounded, with what each measured;
## writes docs/layers.txt
layers:
	@{ $(call figure_header,make layers); \
	  $(GO) test -race -count=1 -run '^(TestRetryAtOneLayer|TestDeadlinePropagatesThroughChain|TestHiddenRetriesBounded)$$' -v . 2>&1; } | tee docs/layers.txt; ! grep -q '^--- FAIL' docs/layers.txt && \
	$(REQUOTE)

## ci-time: how long CI's make test takes from cold: a clean clone of
## HEAD (committed work only) in a temporary directory, run with an empty
## GOCACHE, GOMODCACHE and GOPATH of its own, so that every module is
## downloaded and every package compiled, as on a fresh CI machine (the
## programs make deps installs are taken as they are). The run's output
## goes to /tmp/httpretry-ci-time.log; when make test passes, writes the
## figure to docs/ci-time.txt (about ten minutes). The inner make is a
## plain `make test`, as CI runs it, without this make's flags.
ci-time:
	@dir=$$(mktemp -d /tmp/httpretry-ci-time.XXXXXX) || exit 1; \
	trap 'chmod -R u+w "$$dir" 2>/dev/null; rm -rf "$$dir"' EXIT; \
	rev=$$(git rev-parse HEAD) && git clone -q --no-local . "$$dir/src" && git -C "$$dir/src" checkout -q --detach "$$rev" || exit 1; \
	echo "make test, cold: a clean clone of $$(git rev-parse --short HEAD), empty caches under $$dir (log: /tmp/httpretry-ci-time.log)"; \
	start=$$(date +%s); \
	(cd "$$dir/src" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL GOCACHE="$$dir/cache/go-build" GOMODCACHE="$$dir/cache/mod" GOPATH="$$dir/gopath" make test) >/tmp/httpretry-ci-time.log 2>&1; rc=$$?; \
	secs=$$(($$(date +%s) - start)); \
	if [ $$rc -ne 0 ]; then echo "make test failed (exit $$rc) after $$secs s: see /tmp/httpretry-ci-time.log" >&2; exit $$rc; fi; \
	{ $(call figure_header,make ci-time); \
	  echo "make test from cold (a clean clone, empty GOCACHE and GOMODCACHE), $$(nproc) CPUs: $$secs s ($$((secs / 60)) min $$((secs % 60)) s)"; \
	} | tee docs/ci-time.txt

.PHONY: metrics-cost figures-check

## figures-check: runs the cheap figure-writing targets one after another
## (make layers, make metrics-cost, and make demo-payments with
## PAYMENTS_ORDERS=300) in a copy of the working tree, then the figure
## test there: a doc that quotes in prose a figure one of them rewrites
## fails here, instead of breaking make check for whoever runs the
## documented command next. The working tree's own files are left as they
## are (a few minutes)
FIGURES_CHECK_ORDERS ?= 300
figures-check: deps
	@dir=$$(mktemp -d /tmp/httpretry-figures.XXXXXX) || exit 1; \
	trap 'rm -rf "$$dir"' EXIT; \
	git ls-files -z --cached --others --exclude-standard | xargs -0 sh -c 'for f; do [ -e "$$f" ] || continue; mkdir -p "$$0/$$(dirname "$$f")" && cp -p "$$f" "$$0/$$f" || exit 1; done' "$$dir" || exit 1; \
	echo "figures-check: make layers metrics-cost demo-payments (PAYMENTS_ORDERS=$(FIGURES_CHECK_ORDERS)), then the figure test, in $$dir"; \
	cd "$$dir" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s layers metrics-cost demo-payments PAYMENTS_ORDERS=$(FIGURES_CHECK_ORDERS) >figures-check.log 2>&1 || { tail -40 figures-check.log; echo "figures-check: a figure-writing target failed" >&2; exit 1; }; \
	$(GO) test -count=1 -run '^TestDocFiguresGenerated$$' . || { echo "figures-check: the docs disagree with the files the targets just wrote: quote those figures in lines that requote updates (CONTRIBUTING.md, Figures)" >&2; exit 1; }

## metrics-cost: allocations per successful operation that promretry and
## otelretry (metrics, traces off) add over the same Transport without
## them, over an in-memory *http.Transport and another in-memory
## RoundTripper (testing.AllocsPerRun); fails above 2 and 4, or when an
## instrumented Transport allocates more than one with empty hooks
## (TestInstrumentedSuccessPathAllocations: both skip under -race). Prints
## them and writes docs/observability/metrics-cost.txt
metrics-cost:
	@mkdir -p docs/observability
	@{ echo "# make metrics-cost, $$(date -u +%Y-%m-%d), $$($(GO) version | cut -d' ' -f3-)"; \
	  (cd contrib/promretry && $(GO) test -count=1 -run '^(TestCostPerOperation|TestInstrumentedSuccessPathAllocations)$$' -v .) | grep -E 'over|FAIL' | sed 's/^ *cost_test.go:[0-9]*: //'; \
	  (cd contrib/otelretry && $(GO) test -count=1 -run '^TestCostPerOperation$$' -v .) | grep -E 'over|FAIL' | sed 's/^ *cost_test.go:[0-9]*: //'; \
	} | tee docs/observability/metrics-cost.txt; ! grep -q FAIL docs/observability/metrics-cost.txt
