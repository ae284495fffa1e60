// Command budgetdrills measures the fleet retry budget (redisretry.Budget)
// on real Redis servers it starts on 127.0.0.1 (redistest): the retries
// granted on a Redis kept past its maxmemory under each eviction policy,
// against the budget's bound; how long after a Redis Cluster replica took
// over a killed master the Budget is back on the shared bucket, with
// go-redis's default ClusterOptions; and the Redis commands a failing
// operation costs, at steady rates and in a burst behind a 2 ms link.
//
//	cd contrib/redisretry && go run ./examples/budgetdrills -runs 3
//
// It exits 1 if a bound does not hold: more retries than capacity + 0.1
// per operation with the default options, the Budget not back on the
// shared bucket within 15 s of a failover, or a burst costing more than
// one command per ten failing operations.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry/internal/budgetdrill"
	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/redis/go-redis/v9"
)

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func main() {
	runs := flag.Int("runs", 3, "Cluster failovers")
	flag.Parse()
	if err := run(os.Stdout, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "budgetdrills:", err)
		os.Exit(1)
	}
}

func run(out io.Writer, runs int) error {
	if runs <= 0 {
		return fmt.Errorf("-runs must be positive")
	}
	redis.SetLogger(quiet{})
	ctx := context.Background()
	var failed []string
	failed = append(failed, eviction(ctx, out)...)
	f, err := failovers(ctx, out, runs)
	if err != nil {
		return err
	}
	failed = append(failed, f...)
	c, err := costs(ctx, out)
	if err != nil {
		return err
	}
	failed = append(failed, c...)
	if len(failed) > 0 {
		for _, f := range failed {
			fmt.Fprintln(out, "FAIL:", f)
		}
		return fmt.Errorf("%d bounds did not hold", len(failed))
	}
	fmt.Fprintln(out, "OK: the budget's bounds held on an evicting Redis, through Cluster failovers and in a burst")
	return nil
}

func eviction(ctx context.Context, out io.Writer) (failed []string) {
	fmt.Fprintf(out, "budget on a Redis past its maxmemory (4 MB, a writer adding 1 KB keys every ms), bucket drained, "+
		"capacity %d, %.1f per operation; 10 processes failing 50 operations/s each for 3 s, up to 2 retries each\n",
		budgetdrill.Capacity, budgetdrill.PerRequest)
	fmt.Fprintln(out, "policy        AllowEviction  operations  granted  bound  evicted  local")
	for _, policy := range []string{"volatile-ttl", "allkeys-lru", "noeviction"} {
		for _, allow := range []bool{false, true} {
			r, err := budgetdrill.Eviction(ctx, budgetdrill.EvictionConfig{
				Policy: policy, Processes: 10, Rate: 50, Duration: 3 * time.Second, AllowEviction: allow,
			})
			if err != nil {
				return append(failed, fmt.Sprintf("%s: %v", policy, err))
			}
			fmt.Fprintf(out, "%-13s %-14v %10d %8d %6d %8d %3d/10\n", policy, allow, r.Ops, r.Granted, r.Bound, r.Evicted, r.Local)
			if !allow && r.Granted > r.Bound {
				failed = append(failed, fmt.Sprintf("%s: %d retries granted, bound %d", policy, r.Granted, r.Bound))
			}
		}
	}
	return failed
}

func failovers(ctx context.Context, out io.Writer, runs int) ([]string, error) {
	fmt.Fprintf(out, "Cluster of 3 masters, 1 replica each (cluster-node-timeout %d ms); the master of the budget's key killed, "+
		"go-redis default ClusterOptions, default Options, a failing operation every 10 ms\n", redistest.ClusterNodeTimeout)
	var failed []string
	for i := range runs {
		c, err := redistest.NewCluster(3, 1)
		if err != nil {
			return nil, err
		}
		r, err := budgetdrill.ClusterFailover(ctx, c, time.Minute)
		c.Close()
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "failover %d: fell back to the local bucket: %v; back on the shared bucket %.1f s after the replica took over\n",
			i+1, r.WentLocal, r.BackAfter.Seconds())
		if r.BackAfter > 15*time.Second {
			failed = append(failed, fmt.Sprintf("failover %d: back after %v", i+1, r.BackAfter))
		}
	}
	return failed, nil
}

func costs(ctx context.Context, out io.Writer) ([]string, error) {
	srv, err := redistest.New()
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	fmt.Fprintln(out, "Redis commands per failing operation, one process, default Options, up to 2 retries per operation, 10 s each:")
	for _, rate := range []int{1, 5, 50, 500} {
		r, err := budgetdrill.SteadyCost(ctx, srv.Addr(), fmt.Sprintf("cost-%d", rate), rate, 10*time.Second)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "%4d failing operations/s: %5d operations, %5d commands, %.2f per failing operation, %d retries granted\n",
			rate, r.Ops, r.Commands, r.PerOp(), r.Granted)
	}
	const burst = 200
	r, err := budgetdrill.BurstCost(ctx, srv.Addr(), "cost-burst", burst, 2*time.Millisecond)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "a burst of %d failing operations at once, Redis 2 ms away each way: %d commands, %.2f per failing operation, %d retries granted\n",
		burst, r.Commands, r.PerOp(), r.Granted)
	if r.Commands > burst/10 {
		return []string{fmt.Sprintf("burst: %d commands for %d operations", r.Commands, burst)}, nil
	}
	return nil, nil
}
