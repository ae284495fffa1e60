// Command storm measures what retry policies do to a dependency on a bad
// day. In one process it runs a server model on loopback (at most C
// requests at once for S each; the excess shed at once with 503) and an
// open-loop load generator (Poisson arrivals at λ per second, each a GET
// with a deadline D), and passes every policy, one after another, through
// the same arrivals in these scenarios:
//
//   - outage: healthy, then every request 503, then healthy again;
//   - brownout: healthy, then capacity at 20%, then healthy again;
//   - contention: N clients start together and each needs one success
//     from a server that accepts one request per window, after Marc
//     Brooker's "Exponential Backoff And Jitter";
//   - fleet: the outage again, for httpretry's defaults spread over 1, 10
//     and 100 simulated client processes, first with a budget each, then
//     with one budget for the whole fleet in Redis (contrib/redisretry,
//     against a redis-server the command starts on loopback), then the
//     largest fleet once more against a Redis Cluster of three masters it
//     starts (contrib/redisretry/redistest).
//
// It prints a markdown table on stdout and progress on stderr, then for
// every run with a budget in Redis the lines
//
//	fleet-redis: P=<processes> amplification <outage hits per operation>x, <commands per failed operation> Redis commands per failing operation
//	fleet-redis fairness: P=<processes> retries granted per process min <n>, median <n>, max <n> (mean <x>)
//
// ("fleet-redis-cluster" for the Cluster), and writes results.md,
// timeline.csv, contention.csv and SVG charts to -out.
//
// Usage, from the bench module:
//
//	go run ./storm -out ../docs/storm
//	go run ./storm -phase 1s -scenarios outage -policies single,httpretry
//	go run ./storm -scenarios fleet -out ""
//	go run ./storm -scenarios hedging -short -out ""
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"time"
)

// config is one invocation's settings.
type config struct {
	phase     time.Duration // length of each phase of the outage and brownout
	rate      float64       // λ, operations per second
	capacity  int           // C, requests served at once
	service   time.Duration // S
	deadline  time.Duration // D, per operation
	brownout  float64       // capacity fraction in the brownout
	window    time.Duration // contention: one request accepted per window
	capWindow int           // contention: MaxDelay in windows
	seed      uint64
	fleet     []int    // simulated client processes in the fleet scenario
	noRedis   bool     // leave out the fleet's shared budget in Redis
	clients   []int    // contention sizes
	scenarios []string // which to run
	throttle  []string // which throttle scenarios to run (throttle.go)
	policies  []policy
	out       string    // output directory; "" writes no files
	log       io.Writer // progress
}

var allScenarios = []string{"outage", "brownout", "contention", "fleet"}

func main() {
	if hedgingRequested(os.Args[1:]) {
		os.Exit(hedgingMain(os.Args[1:], os.Stdout, os.Stderr)) // flags of its own: hedging.go
	}
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if len(cfg.throttle) > 0 {
		if err := throttleMain(ctx, cfg, os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "storm:", err)
			os.Exit(1)
		}
	}
	if len(cfg.scenarios) == 0 {
		return
	}
	res := runAll(ctx, cfg)
	res.command = strings.Join(append([]string{"go run ./storm"}, os.Args[1:]...), " ")
	if res.err != nil {
		fmt.Fprintln(os.Stderr, "storm:", res.err)
		os.Exit(1)
	}
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "storm: interrupted; no files written")
		os.Exit(1)
	}
	fmt.Print(report(res))
	for _, r := range redisRuns(res) {
		fmt.Println(redisLine(r))
		fmt.Println(fairnessLine(r))
	}
	if cfg.out != "" {
		if err := writeOutputs(res, cfg.out); err != nil {
			fmt.Fprintln(os.Stderr, "storm:", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "storm: wrote %s\n", cfg.out)
	}
}

// parseFlags reads the command line; errors are reported to errOut.
func parseFlags(args []string, errOut io.Writer) (config, error) {
	cfg := config{log: errOut}
	fs := flag.NewFlagSet("storm", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.DurationVar(&cfg.phase, "phase", 4*time.Second, "length of each of the three phases of the outage, brownout and fleet scenarios")
	fs.Float64Var(&cfg.rate, "rate", 200, "arrival rate λ, operations per second (Poisson)")
	fs.IntVar(&cfg.capacity, "capacity", 20, "requests the server serves at once, C")
	fs.DurationVar(&cfg.service, "service", 20*time.Millisecond, "service time of a request, S")
	fs.DurationVar(&cfg.deadline, "deadline", time.Second, "deadline of each operation, D (a context deadline)")
	fs.Float64Var(&cfg.brownout, "brownout", 0.2, "fraction of the capacity left in the brownout")
	fs.DurationVar(&cfg.window, "window", 10*time.Millisecond, "contention: the server accepts one request per window, and the first backoff window is as long")
	fs.IntVar(&cfg.capWindow, "cap", 10, "contention: the largest backoff window (MaxDelay), in windows")
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of the arrivals, the same for every policy")
	fleetFlag := fs.String("fleet", "1,10,100", "simulated client processes in the fleet scenario")
	fs.BoolVar(&cfg.noRedis, "no-redis", false, "leave out the fleet scenario's budget shared in Redis (which needs redis-server on PATH)")
	clientsFlag := fs.String("clients", "10,25,50", "clients in the contention scenario")
	scen := fs.String("scenarios", strings.Join(allScenarios, ","), "scenarios to run")
	var keys []string
	for _, p := range policies() {
		keys = append(keys, p.key)
	}
	pols := fs.String("policies", strings.Join(keys, ","), "policies in the outage and brownout scenarios")
	fs.StringVar(&cfg.out, "out", "../docs/storm", `output directory for results.md, timeline.csv, contention.csv and the SVGs ("" for none)`)
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	fail := func(format string, a ...any) (config, error) {
		err := fmt.Errorf(format, a...)
		fmt.Fprintln(errOut, "storm:", err)
		return cfg, err
	}
	var err error
	if cfg.fleet, err = parseInts(*fleetFlag); err != nil {
		return fail("-fleet: %v", err)
	}
	if cfg.clients, err = parseInts(*clientsFlag); err != nil {
		return fail("-clients: %v", err)
	}
	for s := range strings.SplitSeq(*scen, ",") {
		if !cfg.addScenario(s) {
			return fail("-scenarios: unknown %q (have %s, and throttle for all of %s)", s, strings.Join(allScenarios, ","), strings.Join(throttleScenarios, ","))
		}
	}
	for k := range strings.SplitSeq(*pols, ",") {
		i := slices.Index(keys, k)
		if i < 0 {
			return fail("-policies: unknown %q (have %s)", k, strings.Join(keys, ","))
		}
		cfg.policies = append(cfg.policies, policies()[i])
	}
	switch {
	case cfg.phase < 3*bucket:
		return fail("-phase must be at least %v", 3*bucket)
	case cfg.rate <= 0 || cfg.capacity <= 0 || cfg.service <= 0 || cfg.deadline <= 0 || cfg.window <= 0 || cfg.capWindow <= 0:
		return fail("-rate, -capacity, -service, -deadline, -window and -cap must be positive")
	case cfg.brownout <= 0 || cfg.brownout > 1:
		return fail("-brownout must be in (0, 1]")
	}
	return cfg, nil
}

// parseInts parses a comma-separated list of positive integers.
func parseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// schedule returns the three phases of a scenario whose middle phase is m.
func (c config) schedule(m mode) []phase {
	return []phase{
		{name: "healthy", dur: c.phase},
		{name: m.String(), dur: c.phase, mode: m, capacity: c.brownout},
		{name: "recovery", dur: c.phase},
	}
}

func (c config) has(scenario string) bool { return slices.Contains(c.scenarios, scenario) }
