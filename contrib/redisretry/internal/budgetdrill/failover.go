package budgetdrill

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry"
	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/redis/go-redis/v9"
)

// FailoverResult is what one Cluster failover did to a Budget.
type FailoverResult struct {
	// WentLocal reports whether the Budget fell back to its local bucket
	// after the kill.
	WentLocal bool
	// BackAfter is the time from the replica taking over (it says it is
	// a master) to the Budget back on the shared bucket.
	BackAfter time.Duration
}

// stateTimes records when a Budget reported each change.
type stateTimes struct {
	mu     sync.Mutex
	local  []time.Time
	shared []time.Time
}

func (s *stateTimes) add(st redisretry.State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st == redisretry.Local {
		s.local = append(s.local, time.Now())
	} else {
		s.shared = append(s.shared, time.Now())
	}
}

// sharedAfter returns the first return to the shared bucket after t.
func (s *stateTimes) sharedAfter(t time.Time) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.shared, func(at time.Time) bool { return at.After(t) })
	if i < 0 {
		return time.Time{}, false
	}
	return s.shared[i], true
}

func (s *stateTimes) wentLocal() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.local) > 0
}

// ClusterFailover runs a Budget with default Options on a client of c
// with go-redis's default ClusterOptions (only the addresses given),
// sends it a failing operation every 10 ms, kills the master of its key
// and measures how long after its replica took over the Budget is back
// on the shared bucket, waiting at most limit for it.
func ClusterFailover(ctx context.Context, c *redistest.Cluster, limit time.Duration) (FailoverResult, error) {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer rdb.Close()
	const key = "drill-failover"
	times := &stateTimes{}
	b, err := redisretry.NewBudget(rdb, key, Capacity, PerRequest, redisretry.Options{OnStateChange: times.add})
	if err != nil {
		return FailoverResult{}, err
	}
	defer b.Close()
	victim, replica, err := masterOf(ctx, c, rdb, key)
	if err != nil {
		return FailoverResult{}, err
	}
	trafficCtx, stop := context.WithCancel(ctx)
	defer stop()
	var traffic sync.WaitGroup
	traffic.Go(func() { failEvery(trafficCtx, b, 10*time.Millisecond) })
	defer traffic.Wait()
	defer stop()
	if _, err := b.Tokens(ctx); err != nil || !b.Withdraw(ctx) || b.State() != redisretry.Shared {
		return FailoverResult{}, fmt.Errorf("budgetdrill: the Budget is not on the shared bucket before the kill (%v)", err)
	}

	killed := make(chan error, 1)
	go func() {
		_, err := c.KillMaster(victim)
		killed <- err
	}()
	took, err := tookOver(ctx, replica)
	if err != nil {
		<-killed
		return FailoverResult{}, err
	}
	if err := <-killed; err != nil {
		return FailoverResult{}, err
	}
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if at, ok := times.sharedAfter(took); ok {
			return FailoverResult{WentLocal: times.wentLocal(), BackAfter: at.Sub(took)}, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return FailoverResult{WentLocal: times.wentLocal()}, fmt.Errorf("budgetdrill: the Budget was not back on the shared bucket within %v of the replica taking over", limit)
}

// failEvery makes a failing operation every period until ctx ends.
func failEvery(ctx context.Context, b *redisretry.Budget, period time.Duration) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		b.Deposit()
		op, cancel := context.WithTimeout(ctx, time.Second)
		b.Withdraw(op)
		cancel()
	}
}

// masterOf returns the index in c.Masters of the master serving key, and
// its replica.
func masterOf(ctx context.Context, c *redistest.Cluster, rdb *redis.ClusterClient, key string) (int, *redistest.Server, error) {
	slot, err := rdb.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		return 0, nil, fmt.Errorf("budgetdrill: CLUSTER KEYSLOT: %w", err)
	}
	owner, err := c.Owner(int(slot))
	if err != nil {
		return 0, nil, err
	}
	masters, err := c.Masters()
	if err != nil {
		return 0, nil, err
	}
	replicas, err := c.Replicas(owner)
	if err != nil || len(replicas) == 0 {
		return 0, nil, fmt.Errorf("budgetdrill: no replica of the key's master: %v", err)
	}
	return slices.Index(masters, owner), replicas[0], nil
}

// tookOver polls replica's ROLE until it says master, and returns when.
func tookOver(ctx context.Context, replica *redistest.Server) (time.Time, error) {
	rdb := redis.NewClient(&redis.Options{Addr: replica.Addr(), MaxRetries: -1})
	defer rdb.Close()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		role, err := rdb.Do(ctx, "role").Slice()
		if err == nil && len(role) > 0 && role[0] == "master" {
			return time.Now(), nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Time{}, errors.New("budgetdrill: the replica did not take over within a minute")
}
