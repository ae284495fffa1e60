package redisretry

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/redis/go-redis/v9"
)

// Two hundred requests of one process fail at once, Redis 2 ms away each
// way: each deposits and asks for a retry before any answer is back. The
// asks fly together (one call in flight, asking for every Withdraw
// waiting), so the burst costs at most one Redis command per ten failing
// operations, and the grants stay within the bucket and the deposits,
// while the full bucket is given out.
func TestBudgetBurstOfFailuresCostsAtMostOneCommandPerTenOperations(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	proxy := redistest.StartLatencyProxy(t, srv.Addr(), 2*time.Millisecond)
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true, PoolSize: 256})
	t.Cleanup(func() { rdb.Close() })
	b := newBudget(t, rdb, "burst", 20, 0.1, Options{CallTimeout: patient, FlushInterval: time.Hour})
	c := &counter{}
	rdb.AddHook(c)

	const burst = 200
	start := make(chan struct{})
	var granted atomic.Int64
	var wg sync.WaitGroup
	for range burst {
		wg.Go(func() {
			<-start
			b.Deposit()
			if b.Withdraw(context.Background()) {
				granted.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()

	if got, most := c.n.Load(), int64(burst/10); got > most {
		t.Errorf("a burst of %d failing operations made %d Redis commands; want at most %d", burst, got, most)
	}
	// 20 tokens in the bucket, 0.1 deposited per operation.
	if got := granted.Load(); got < 20 || got > 20+burst/10 {
		t.Errorf("granted %d retries; want the bucket's 20 at least and at most 20 + 0.1 per operation = %d", got, 20+burst/10)
	}
	t.Logf("%d failing operations: %d Redis commands, %d retries granted", burst, c.n.Load(), granted.Load())
}

// The Withdraw whose call the others wait for leaves (its context ends)
// while Redis has not answered: it is refused, its waiters are still
// granted (they ask again, or take what the call leased when it lands),
// and once the Budget is closed the bucket has lost exactly the tokens
// the waiters spent: the grant of the call whose caller left went back.
func TestBudgetWaitersOfACallWhoseCallerLeftAreStillGranted(t *testing.T) {
	t.Parallel()
	srv, rdb := server(t)
	g := &tokenGate{open: make(chan struct{})}
	rdb.AddHook(g)
	b, err := NewBudget(rdb, "flight-left", 40, 0, Options{FleetSize: 4, FlushInterval: time.Hour, CallTimeout: patient})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	leader, leave := context.WithCancel(context.Background())
	led := make(chan bool)
	go func() { led <- b.Withdraw(leader) }()
	eventually(t, "the first Withdraw asking", func() bool { return b.asking.Load() == 1 })
	const waiters = 5
	var granted atomic.Int64
	var wg sync.WaitGroup
	for range waiters {
		wg.Go(func() {
			if b.Withdraw(context.Background()) {
				granted.Add(1)
			}
		})
	}
	eventually(t, "every waiter asking", func() bool { return b.asking.Load() == 1+waiters })
	leave()
	if <-led {
		t.Error("the Withdraw whose context ended was granted")
	}
	close(g.open)
	wg.Wait()
	if got := granted.Load(); got != waiters {
		t.Errorf("%d of %d waiters granted; want all", got, waiters)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := rawTokens(t, srv.Client(t), "flight-left", 40); got != 40-waiters {
		t.Errorf("the bucket holds %v tokens after %d were spent; want %d", got, waiters, 40-waiters)
	}
}
