package redistest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A LatencyProxy delays each direction: a round trip through it takes at
// least twice the one-way delay, and every reply arrives intact, also
// for commands sent together on several connections.
func TestLatencyProxyDelaysEachDirection(t *testing.T) {
	t.Parallel()
	srv := Start(t)
	const oneWay = 20 * time.Millisecond
	p := StartLatencyProxy(t, srv.Addr(), oneWay)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), PoolSize: 20, ContextTimeoutEnabled: true})
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil { // the first connection
		t.Fatal(err)
	}
	start := time.Now()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if rtt := time.Since(start); rtt < 2*oneWay {
		t.Errorf("a round trip took %v; want at least %v", rtt, 2*oneWay)
	}
	const calls = 20
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	start = time.Now()
	for range calls {
		wg.Go(func() {
			v, err := rdb.Get(ctx, "k").Result()
			if err == nil && v != "v" {
				t.Errorf("GET = %q; want v", v)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took < 2*oneWay {
		t.Errorf("%d calls together took %v; want at least one round trip, %v", calls, took, 2*oneWay)
	}
	t.Logf("%d calls together through a proxy of %v each way: %v", calls, oneWay, time.Since(start))
}

// Closing a LatencyProxy ends its connections: a client's next call
// fails rather than hangs.
func TestLatencyProxyCloseEndsConnections(t *testing.T) {
	t.Parallel()
	srv := Start(t)
	p, err := NewLatencyProxy(srv.Addr(), time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := rdb.Ping(ctx).Err(); err == nil {
		t.Error("PING through a closed proxy succeeded")
	}
}
