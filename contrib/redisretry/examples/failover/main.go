// Command failover measures what a failover does to a
// redisretry.IdempotencyStore under traffic. It starts, on 127.0.0.1
// (redistest), a primary with one replica and three sentinels, a primary
// with two replicas and three sentinels, and a Redis Cluster of three
// masters with two replicas each. For each way of failing over (SENTINEL
// FAILOVER with the old primary still running; the primary killed;
// CLUSTER FAILOVER FORCE with the old master still running) and each
// IdempotencyOptions.WaitReplicas from 0 to the replica count, it fails
// over -runs times while -workers goroutines reserve fresh keys. After
// each failover it reserves every key Reserve had acknowledged again: a
// key reserved afresh is a reservation the new primary lacks, whose retry
// would run the operation a second time. Then it measures Reserve's
// latency with and without waiting for the replicas.
//
//	make redis-failover
//	cd contrib/redisretry && go run ./examples/failover -runs 5
//
// It exits 1 if a reservation acknowledged with WaitReplicas equal to the
// replica count was lost, or if a store whose WaitReplicas counts fewer
// replicas than the master has acknowledged any.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry/internal/failoverdrill"
	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/redis/go-redis/v9"
)

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func main() {
	runs := flag.Int("runs", 5, "failovers per row")
	workers := flag.Int("workers", 8, "goroutines reserving fresh keys during each failover")
	n := flag.Int("latency-n", 2000, "reservations per latency measurement")
	flag.Parse()
	if err := run(os.Stdout, *runs, *workers, *n); err != nil {
		fmt.Fprintln(os.Stderr, "failover:", err)
		os.Exit(1)
	}
}

// setup is one set-up the program fails over, and how.
type setup struct {
	name     string
	replicas int // per master
	ways     []string
	start    func() (failoverdrill.Target, func(), error)
}

func setups() []setup {
	sentinel := func(replicas int) func() (failoverdrill.Target, func(), error) {
		return func() (failoverdrill.Target, func(), error) {
			set, err := redistest.NewSentinelReplicas(replicas)
			if err != nil {
				return nil, nil, err
			}
			return failoverdrill.Sentinel{Set: set}, func() { set.Close() }, nil
		}
	}
	return []setup{
		{"sentinel, 1 replica", 1, []string{failoverdrill.Switch, failoverdrill.Kill}, sentinel(1)},
		{"sentinel, 2 replicas", 2, []string{failoverdrill.Switch}, sentinel(2)},
		{"cluster, 2 replicas", 2, []string{failoverdrill.Force}, func() (failoverdrill.Target, func(), error) {
			c, err := redistest.NewCluster(3, 2)
			if err != nil {
				return nil, nil, err
			}
			return failoverdrill.Cluster{C: c}, func() { c.Close() }, nil
		}},
	}
}

func run(out io.Writer, runs, workers, n int) error {
	if runs <= 0 || workers <= 0 || n < 100 {
		return fmt.Errorf("-runs and -workers must be positive, -latency-n at least 100")
	}
	redis.SetLogger(quiet{})
	fmt.Fprintf(out, "on 127.0.0.1: a primary with one replica, and one with two, each behind three sentinels (quorum 2, down after %d ms); "+
		"a Cluster of three masters with two replicas each; %d failovers per row, %d goroutines reserving fresh keys from 300 ms before each failover to 300 ms after it\n",
		redistest.SentinelDownAfter, runs, workers)
	fmt.Fprintf(out, "%-21s %-8s %-13s %8s %6s %8s %7s  %s\n", "set-up", "failover", "WaitReplicas", "acked", "lost", "refused", "errors", "lost per failover")
	var bad []string
	for _, su := range setups() {
		target, stop, err := su.start()
		if err != nil {
			return err
		}
		problems, err := rows(out, su, target, runs, workers)
		if err == nil {
			err = latency(out, su, target, n)
		}
		stop()
		if err != nil {
			return err
		}
		bad = append(bad, problems...)
	}
	if len(bad) != 0 {
		return fmt.Errorf("%v", bad)
	}
	fmt.Fprintln(out, "OK: no reservation acknowledged with WaitReplicas equal to the replica count was lost, and WaitReplicas below it acknowledged none")
	return nil
}

// rows fails su over for each way and WaitReplicas, prints a row for
// each, and returns what broke the store's promises.
func rows(out io.Writer, su setup, target failoverdrill.Target, runs, workers int) ([]string, error) {
	var bad []string
	for _, how := range su.ways {
		for wait := 0; wait <= su.replicas; wait++ {
			res, err := failoverdrill.Failovers(target, failoverdrill.Config{
				Runs: runs, Workers: workers, How: how, WaitReplicas: wait,
				Prefix: fmt.Sprintf("drill-%s-%d-", how, wait)})
			if err != nil {
				return nil, fmt.Errorf("%s, %s, WaitReplicas %d: %w", su.name, how, wait, err)
			}
			fmt.Fprintf(out, "%-21s %-8s %-13d %8d %6d %8d %7d  %v\n", su.name, how, wait, res.Acked, res.Lost, res.Refused, res.Errors, res.PerRun)
			switch {
			case wait == su.replicas && res.Lost != 0:
				bad = append(bad, fmt.Sprintf("%s, %s: %d reservations acknowledged with WaitReplicas %d lost", su.name, how, res.Lost, wait))
			case wait > 0 && wait < su.replicas && res.Acked != 0:
				bad = append(bad, fmt.Sprintf("%s, %s: %d reservations acknowledged with WaitReplicas %d", su.name, how, res.Acked, wait))
			}
		}
	}
	return bad, nil
}

// latency prints Reserve's latency on target without waiting and
// waiting for every replica.
func latency(out io.Writer, su setup, target failoverdrill.Target, n int) error {
	fmt.Fprintf(out, "Reserve latency on the %s set-up, %d reservations one after another, no failover:\n", su.name, n)
	for _, wait := range []int{0, su.replicas} {
		p50, p99, refused, err := failoverdrill.Latency(target, fmt.Sprintf("latency-%d-", wait), n, wait)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "  WaitReplicas %d: p50 %.3f ms, p99 %.3f ms, refused %d\n", wait, ms(p50), ms(p99), refused)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
