// Package budgetdrill measures the fleet Budget on real Redis servers
// where an operator's bad day hurts it: a Redis that evicts keys under
// memory pressure (the retries granted against the budget's bound), a
// Redis Cluster master killed (how long the Budget stays on its local
// bucket after a replica took over, with go-redis's default options), and
// failures at a steady rate (the Redis commands each failing operation
// costs). The drills test and the budget figures program share it.
package budgetdrill

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry"
	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/redis/go-redis/v9"
)

// Capacity and PerRequest are the budget of every drill: the default
// httpretry budget, shared.
const (
	Capacity   = 20
	PerRequest = 0.1
)

// retriesPerOp is how many retries a failing operation asks for: those
// of httpretry's default MaxAttempts, 3.
const retriesPerOp = 2

// EvictionConfig is one run against a Redis under memory pressure.
type EvictionConfig struct {
	Policy        string        // maxmemory-policy of the server
	Processes     int           // Budgets on the key, one client each
	Rate          int           // failing operations a second, per process
	Duration      time.Duration // of the run
	AllowEviction bool          // the Budgets' option
}

// EvictionResult counts one run.
type EvictionResult struct {
	Ops     int // failing operations
	Granted int // retries granted
	Bound   int // Capacity + PerRequest per operation
	Evicted int // keys the server evicted during the run
	Local   int // Budgets on their local bucket at the end
}

// Eviction starts a server with maxmemory 4 MB and c.Policy, fills it
// with keys that live an hour (so that volatile-ttl evicts the budget's
// keys first), drains the bucket, then runs c.Processes Budgets that
// fail c.Rate operations a second each for c.Duration, each asking for
// up to two retries, while a writer keeps the server full.
func Eviction(ctx context.Context, c EvictionConfig) (EvictionResult, error) {
	srv, err := redistest.New("--maxmemory", "4mb", "--maxmemory-policy", c.Policy)
	if err != nil {
		return EvictionResult{}, err
	}
	defer srv.Close()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	const key = "drill-evict"
	// The bucket drained, as a fleet in an outage leaves it.
	if err := admin.Set(ctx, key, 0, time.Hour).Err(); err != nil {
		return EvictionResult{}, err
	}
	fill := &filler{rdb: admin}
	if err := fill.to(ctx, 6000); err != nil { // 6 MB of 1 KB values: past maxmemory
		return EvictionResult{}, err
	}
	before, err := evicted(ctx, admin)
	if err != nil {
		return EvictionResult{}, err
	}
	budgets := make([]*redisretry.Budget, c.Processes)
	for i := range budgets {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
		defer rdb.Close()
		b, err := redisretry.NewBudget(rdb, key, Capacity, PerRequest,
			redisretry.Options{FleetSize: c.Processes, CallTimeout: time.Second, AllowEviction: c.AllowEviction})
		if err != nil {
			return EvictionResult{}, err
		}
		defer b.Close()
		budgets[i] = b
	}
	runCtx, stop := context.WithTimeout(ctx, c.Duration)
	defer stop()
	var writer sync.WaitGroup
	writer.Go(func() { fill.keepFull(runCtx) })
	ops, granted := failAtRate(runCtx, budgets, c.Rate)
	stop()
	writer.Wait()
	after, err := evicted(ctx, admin)
	if err != nil {
		return EvictionResult{}, err
	}
	res := EvictionResult{Ops: ops, Granted: granted, Bound: Capacity + int(PerRequest*float64(ops)), Evicted: after - before}
	for _, b := range budgets {
		if b.State() == redisretry.Local {
			res.Local++
		}
	}
	return res, nil
}

// failAtRate runs one goroutine per Budget, each failing rate operations
// a second until ctx ends: a deposit, then up to two retries while
// granted. It returns the operations and the retries granted.
func failAtRate(ctx context.Context, budgets []*redisretry.Budget, rate int) (ops, granted int) {
	var nOps, nGranted atomic.Int64
	var wg sync.WaitGroup
	for _, b := range budgets {
		wg.Go(func() {
			tick := time.NewTicker(time.Second / time.Duration(rate))
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				b.Deposit()
				nOps.Add(1)
				for range retriesPerOp {
					if !b.Withdraw(ctx) {
						break
					}
					nGranted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return int(nOps.Load()), int(nGranted.Load())
}

// filler writes 1 KB values that live an hour.
type filler struct {
	rdb *redis.Client
	n   int
}

var value = string(make([]byte, 1024))

// to writes until n keys were written; a write refused for memory
// (noeviction) ends it without an error.
func (f *filler) to(ctx context.Context, n int) error {
	for ; f.n < n; f.n++ {
		err := f.rdb.Set(ctx, "fill:"+strconv.Itoa(f.n), value, time.Hour).Err()
		if redis.HasErrorPrefix(err, "OOM") {
			return nil
		}
		if err != nil {
			return fmt.Errorf("budgetdrill: filling the server: %w", err)
		}
	}
	return nil
}

// keepFull writes a key every millisecond until ctx ends, so that the
// server keeps evicting.
func (f *filler) keepFull(ctx context.Context) {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		f.rdb.Set(ctx, "fill:"+strconv.Itoa(f.n), value, time.Hour)
		f.n++
	}
}

// evicted reads the server's count of evicted keys.
func evicted(ctx context.Context, rdb *redis.Client) (int, error) {
	info, err := rdb.InfoMap(ctx, "stats").Result()
	if err != nil {
		return 0, fmt.Errorf("budgetdrill: INFO stats: %w", err)
	}
	return strconv.Atoi(info["Stats"]["evicted_keys"])
}
