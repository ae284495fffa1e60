// Package failoverdrill measures what a failover (Sentinel, or a Redis
// Cluster's) does to an IdempotencyStore under traffic: how many
// reservations that Reserve acknowledged the promoted replica lacks
// (replication is asynchronous, so a retry of such a key would run its
// operation again), with and without IdempotencyOptions.WaitReplicas,
// and what waiting for replicas costs Reserve in latency. The drills
// test and the failover figures program share it.
package failoverdrill

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry"
	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/httpretry/httpretry/idempotency"
	"github.com/redis/go-redis/v9"
)

// How a run fails the primary over.
const (
	// Switch asks the sentinels to fail over (SENTINEL FAILOVER) while
	// the old primary runs on: it takes writes until the sentinels make
	// it a replica and it drops them.
	Switch = "switch"
	// Kill kills the primary with SIGKILL; the sentinels promote a
	// replica after SentinelDownAfter.
	Kill = "kill"
	// Force asks the first replica of a Cluster's first master to take
	// over at once (CLUSTER FAILOVER FORCE) while the master runs on: it
	// takes writes until it learns of the new epoch.
	Force = "force"
)

// Target is a set-up a drill fails over: [Sentinel] or [Cluster].
type Target interface {
	// Client returns a new client of the set-up; the caller closes it.
	Client() redis.UniversalClient
	// Fail fails the set-up over as how says, and returns the server it
	// killed, if any.
	Fail(how string) (*redistest.Server, error)
	// Wait waits until the set-up is whole and in sync again.
	Wait() error
}

// Sentinel is a Sentinel set-up as a Target: Switch or Kill.
type Sentinel struct{ Set *redistest.Sentinel }

// Client returns a failover client of the set-up.
func (s Sentinel) Client() redis.UniversalClient {
	return redis.NewFailoverClient(s.Set.FailoverOptions())
}

// Wait waits until the set-up is ready.
func (s Sentinel) Wait() error { return s.Set.Wait() }

// Fail fails the primary over as how says.
func (s Sentinel) Fail(how string) (*redistest.Server, error) {
	switch how {
	case Switch:
		return nil, s.Set.Failover()
	case Kill:
		return s.Set.KillPrimary()
	}
	return nil, fmt.Errorf("failoverdrill: no failover %q on Sentinel", how)
}

// Cluster is a Redis Cluster as a Target: Force.
type Cluster struct{ C *redistest.Cluster }

// Client returns a Cluster client.
func (c Cluster) Client() redis.UniversalClient { return redis.NewClusterClient(c.C.ClusterOptions()) }

// Wait waits until every slot is served and every replica in sync.
func (c Cluster) Wait() error { return c.C.Wait() }

// Fail makes the first replica of the first master take over, as how
// (Force) says.
func (c Cluster) Fail(how string) (*redistest.Server, error) {
	if how != Force {
		return nil, fmt.Errorf("failoverdrill: no failover %q on a Cluster", how)
	}
	masters, err := c.C.Masters()
	if err != nil {
		return nil, err
	}
	replicas, err := c.C.Replicas(masters[0])
	if err != nil {
		return nil, err
	}
	if len(replicas) == 0 {
		return nil, fmt.Errorf("failoverdrill: master %s has no replica", masters[0].Addr())
	}
	return nil, c.C.ForceFailover(replicas[0])
}

// Config is one series of failovers.
type Config struct {
	Runs         int           // failovers
	Workers      int           // goroutines reserving fresh keys
	How          string        // Switch or Kill (Sentinel), Force (Cluster)
	WaitReplicas int           // the store's option; 0 waits for none
	WaitTimeout  time.Duration // the store's option
	Prefix       string        // of the store's keys, unique to the series
}

// Result counts a series of failovers.
type Result struct {
	Acked   int // reservations Reserve returned
	Lost    int // of those, reservations the new primary lacks
	Refused int // Reserves refused for replication: ErrNotReplicated, ErrReplicasUncounted
	Errors  int // other failed Reserves (the primary gone, read-only)
	// PerRun is Lost for each failover.
	PerRun []int
}

// Failovers runs c.Runs failovers of target, each during traffic, and
// counts the reservations lost.
func Failovers(target Target, c Config) (Result, error) {
	var res Result
	for i := range c.Runs {
		r, err := failover(target, c, fmt.Sprintf("%s%d:", c.Prefix, i))
		if err != nil {
			return res, fmt.Errorf("run %d: %w", i, err)
		}
		res.Acked += r.Acked
		res.Lost += r.Lost
		res.Refused += r.Refused
		res.Errors += r.Errors
		res.PerRun = append(res.PerRun, r.Lost)
	}
	return res, nil
}

// acked is a reservation Reserve returned.
type acked struct {
	key   string
	token idempotency.Token
}

// failover is one run: traffic, a failover amid it, then a check of
// every acknowledged reservation on the new primary.
func failover(target Target, c Config, prefix string) (Result, error) {
	rdb := target.Client()
	defer rdb.Close()
	store, err := redisretry.NewIdempotencyStore(rdb, prefix, redisretry.IdempotencyOptions{
		CallTimeout: 2 * time.Second, WaitReplicas: c.WaitReplicas, WaitTimeout: c.WaitTimeout})
	if err != nil {
		return Result{}, err
	}
	t := &traffic{store: store}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range c.Workers {
		wg.Go(func() { t.reserve(w, stop) })
	}
	time.Sleep(300 * time.Millisecond)
	killed, ferr := target.Fail(c.How)
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	if ferr != nil {
		return Result{}, ferr
	}
	if killed != nil {
		if err := killed.Start(); err != nil {
			return Result{}, err
		}
	}
	if err := target.Wait(); err != nil {
		return Result{}, err
	}
	// A client of its own for the count: the traffic's may still be
	// switching to the new primary, closing connections under the
	// commands on them.
	check := target.Client()
	defer check.Close()
	lost, err := countLost(check, prefix, t.got)
	if err != nil {
		return Result{}, err
	}
	// Each run starts from empty primaries, so that the next failover
	// does not first resync what this one wrote.
	if err := flushAll(check); err != nil {
		return Result{}, err
	}
	if err := target.Wait(); err != nil {
		return Result{}, err
	}
	return Result{Acked: len(t.got), Lost: lost, Refused: int(t.refused.Load()), Errors: int(t.errs.Load())}, nil
}

// traffic is the reservations of a run's workers.
type traffic struct {
	store   *redisretry.IdempotencyStore
	mu      sync.Mutex // protects got
	got     []acked
	refused atomic.Int64
	errs    atomic.Int64
}

// reserve reserves fresh keys, as worker w, until stop is closed.
func (t *traffic) reserve(w int, stop <-chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		key := fmt.Sprintf("w%d-%d", w, i)
		r, err := t.store.Reserve(context.Background(), key, "fp", time.Hour)
		switch {
		case errors.Is(err, redisretry.ErrNotReplicated), errors.Is(err, redisretry.ErrReplicasUncounted):
			t.refused.Add(1)
		case err != nil:
			t.errs.Add(1)
			time.Sleep(10 * time.Millisecond) // the primary is gone: do not spin
		case r.State == idempotency.StateReserved:
			t.mu.Lock()
			t.got = append(t.got, acked{key, r.Token})
			t.mu.Unlock()
		}
	}
}

// flushAll empties the primary, or every master of a Cluster.
func flushAll(rdb redis.UniversalClient) error {
	ctx := context.Background()
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			return m.FlushAll(ctx).Err()
		})
	}
	return rdb.FlushAll(ctx).Err()
}

// countLost reserves each acknowledged key again on the new primary, on
// eight goroutines: a key it can reserve afresh (not in progress) is a
// reservation the failover lost, whose retry would run the operation a
// second time.
func countLost(rdb redis.UniversalClient, prefix string, got []acked) (int, error) {
	check, err := redisretry.NewIdempotencyStore(rdb, prefix, redisretry.IdempotencyOptions{CallTimeout: 10 * time.Second})
	if err != nil {
		return 0, err
	}
	var lost atomic.Int64
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for part := range 8 {
		wg.Go(func() {
			for i := part; i < len(got); i += 8 {
				l, err := checkOne(check, got[i])
				if err != nil {
					errs <- err
					return
				}
				if l {
					lost.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return int(lost.Load()), nil
}

// checkOne reserves a's key again, and says whether it was lost; a token
// issued for it now must be above the one acknowledged before.
func checkOne(check *redisretry.IdempotencyStore, a acked) (lost bool, err error) {
	r, err := check.Reserve(context.Background(), a.key, "fp", time.Hour)
	if err != nil {
		return false, fmt.Errorf("checking %s: %w", a.key, err)
	}
	switch {
	case r.State == idempotency.StateInProgress:
		return false, nil
	case r.State == idempotency.StateReserved && !r.TookOver:
		if r.Token <= a.token {
			return true, fmt.Errorf("%s: token %d after the failover, not above %d before it", a.key, r.Token, a.token)
		}
		return true, nil
	}
	return false, fmt.Errorf("%s: %v after the failover; want in progress, or reserved afresh if lost", a.key, r.State)
}

// Latency reserves n fresh keys one after another on target and returns
// the 50th and 99th percentiles of Reserve's duration, with the store
// waiting for waitReplicas replicas, and how many Reserves failed with
// ErrNotReplicated (a replica slower than WaitTimeout); those count in
// the percentiles with the time they took.
func Latency(target Target, prefix string, n, waitReplicas int) (p50, p99 time.Duration, refused int, err error) {
	rdb := target.Client()
	defer rdb.Close()
	store, err := redisretry.NewIdempotencyStore(rdb, prefix, redisretry.IdempotencyOptions{
		CallTimeout: 2 * time.Second, WaitReplicas: waitReplicas})
	if err != nil {
		return 0, 0, 0, err
	}
	ctx := context.Background()
	took := make([]time.Duration, 0, n)
	for i := range n {
		start := time.Now()
		_, err := store.Reserve(ctx, fmt.Sprint("lat-", i), "fp", time.Hour)
		switch {
		case errors.Is(err, redisretry.ErrNotReplicated):
			refused++
		case err != nil:
			return 0, 0, 0, err
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	return took[n/2], took[n*99/100], refused, nil
}
