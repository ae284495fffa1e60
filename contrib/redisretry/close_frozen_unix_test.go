//go:build unix

package redisretry

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Expected: Close returns within its call bound (CallTimeout) on a frozen Redis, not after the client's ReadTimeout spent on the subscription.
func TestCloseDoesNotWaitForASubscriptionToAFrozenRedis(t *testing.T) {
	t.Parallel()
	srv, _ := server(t)
	dialed := make(chan struct{})
	var once sync.Once
	rdb := redis.NewClient(&redis.Options{
		Addr: srv.Addr(), ContextTimeoutEnabled: true, ReadTimeout: 20 * time.Second,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			once.Do(func() { close(dialed) })
			return c, err
		},
	})
	t.Cleanup(func() { rdb.Close() })
	srv.Freeze()
	defer srv.Thaw()
	b, err := NewBudget(rdb, "frozen-subscribe", 20, 0.1, Options{FleetSize: 1, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	<-dialed // the subscription's connection, now waiting for its handshake
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	b.Close()
	// The calls' bound is 50ms; 5s is far beyond any machine's lateness
	// and far below the 20s ReadTimeout.
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Close took %v on a frozen Redis; want it bounded by CallTimeout (50ms), not the ReadTimeout (20s)", took.Round(time.Millisecond))
	}
}
