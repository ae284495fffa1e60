package redisretry

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// tokenGate is a go-redis hook that holds every script call asking for tokens
// until open is closed.
type tokenGate struct{ open chan struct{} }

func (h *tokenGate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *tokenGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *tokenGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if takesTokens(cmd) {
			<-h.open
		}
		return next(ctx, cmd)
	}
}

// One process holds at most MaxLease leased tokens beyond its Withdraws'
// own however many of its Withdraws ask at once (they wait for one call,
// which asks for each of them and one lease), so another process is still
// granted.
func TestOneProcessLeasesAtMostMaxLeaseAtOnce(t *testing.T) {
	t.Parallel()
	srv, a := server(t)
	const concurrent = 5
	g := &tokenGate{open: make(chan struct{})}
	a.AddHook(g)
	o := Options{FleetSize: 4, FlushInterval: time.Hour, CallTimeout: patient}
	busy := newBudget(t, a, "lease-fair", 40, 0, o)
	other := newBudget(t, srv.Client(t), "lease-fair", 40, 0, o)
	var wg sync.WaitGroup
	for range concurrent {
		wg.Go(func() {
			if !busy.Withdraw(context.Background()) {
				t.Error("a Withdraw refused by a bucket of 40 tokens")
			}
		})
	}
	eventually(t, "every Withdraw asking", func() bool { return busy.asking.Load() == concurrent })
	close(g.open)
	wg.Wait()
	if held := busy.leased.Load() / tokenUnit; held > DefaultMaxLease {
		t.Errorf("the busy process holds %d leased tokens; want at most MaxLease (%d)", held, DefaultMaxLease)
	}
	if !other.Withdraw(context.Background()) {
		t.Errorf("another process refused while the busy one holds %d leased tokens of 40", busy.leased.Load()/tokenUnit)
	}
}
