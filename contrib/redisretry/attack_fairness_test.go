package redisretry

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// barrier is a go-redis hook that holds every script call asking for
// tokens until n of them are waiting, then lets them all go: n Withdraws
// of one process in flight at once.
type barrier struct {
	n       int64
	arrived atomic.Int64
	all     chan struct{}
}

func (h *barrier) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *barrier) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *barrier) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if takesTokens(cmd) {
			if h.arrived.Add(1) == h.n {
				close(h.all)
			}
			<-h.all
		}
		return next(ctx, cmd)
	}
}

// Expected: one process holds at most MaxLease leased tokens however many of its Withdraws ask at once, so another process is still granted.
func TestOneProcessLeasesAtMostMaxLeaseAtOnce(t *testing.T) {
	t.Parallel()
	srv, a := server(t)
	if err := bucketScript.Load(context.Background(), a).Err(); err != nil {
		t.Fatal(err)
	}
	const concurrent = 5
	a.AddHook(&barrier{n: concurrent, all: make(chan struct{})})
	o := Options{FleetSize: 4, FlushInterval: time.Hour, CallTimeout: patient}
	busy := newBudget(t, a, "lease-fair", 40, 0, o)
	other := newBudget(t, srv.Client(t), "lease-fair", 40, 0, o)
	var wg sync.WaitGroup
	for range concurrent {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !busy.Withdraw(context.Background()) {
				t.Error("a Withdraw refused by a bucket of 40 tokens")
			}
		}()
	}
	wg.Wait()
	held := busy.leased.Load() / tokenUnit
	if !other.Withdraw(context.Background()) {
		t.Errorf("another process refused while the busy one holds %d leased tokens of 40; want at most MaxLease (%d) held", held, DefaultMaxLease)
	}
}
