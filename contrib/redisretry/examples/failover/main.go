// Command failover measures what a Sentinel failover does to a
// redisretry.IdempotencyStore under traffic. It starts a primary, a
// replica and three sentinels on 127.0.0.1 (redistest), and for each way
// of failing over (SENTINEL FAILOVER with the old primary still running;
// the primary killed) and each IdempotencyOptions.WaitReplicas (0, 1)
// fails the primary over -runs times while -workers goroutines reserve
// fresh keys. After each failover it reserves every key Reserve had
// acknowledged again: a key reserved afresh is a reservation the new
// primary lacks, whose retry would run the operation a second time. Then
// it measures Reserve's latency with and without waiting for the replica.
//
//	make redis-failover
//	cd contrib/redisretry && go run ./examples/failover -runs 5
//
// It exits 1 if a reservation acknowledged with WaitReplicas 1 was lost.
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

func run(out io.Writer, runs, workers, n int) error {
	if runs <= 0 || workers <= 0 || n < 100 {
		return fmt.Errorf("-runs and -workers must be positive, -latency-n at least 100")
	}
	redis.SetLogger(quiet{})
	set, err := redistest.NewSentinel()
	if err != nil {
		return err
	}
	defer set.Close()
	fmt.Fprintf(out, "a primary, one replica and three sentinels on 127.0.0.1 (quorum 2, down after %d ms); %d failovers per row, %d goroutines reserving fresh keys from 300 ms before each failover to 300 ms after it\n",
		redistest.SentinelDownAfter, runs, workers)
	fmt.Fprintf(out, "%-8s %-13s %8s %6s %8s %7s  %s\n", "failover", "WaitReplicas", "acked", "lost", "refused", "errors", "lost per failover")
	lostWaiting := 0
	for _, how := range []string{failoverdrill.Switch, failoverdrill.Kill} {
		for _, wait := range []int{0, 1} {
			res, err := failoverdrill.Failovers(set, failoverdrill.Config{
				Runs: runs, Workers: workers, How: how, WaitReplicas: wait,
				Prefix: fmt.Sprintf("drill-%s-%d-", how, wait)})
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "%-8s %-13d %8d %6d %8d %7d  %v\n", how, wait, res.Acked, res.Lost, res.Refused, res.Errors, res.PerRun)
			if wait > 0 {
				lostWaiting += res.Lost
			}
		}
	}
	fmt.Fprintf(out, "Reserve latency, %d reservations one after another, no failover:\n", n)
	for _, wait := range []int{0, 1} {
		p50, p99, refused, err := failoverdrill.Latency(set, fmt.Sprintf("latency-%d-", wait), n, wait)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "WaitReplicas %d: p50 %.3f ms, p99 %.3f ms, refused %d\n", wait, ms(p50), ms(p99), refused)
	}
	if lostWaiting != 0 {
		return fmt.Errorf("%d reservations acknowledged with WaitReplicas 1 were lost", lostWaiting)
	}
	fmt.Fprintln(out, "OK: no reservation acknowledged with WaitReplicas 1 was lost")
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
