package redisretry

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Expected: while Redis is dead the announcements' subscription redials with backoff, as the probes do, not ten times a second.
func TestDeadRedisIsNotRedialedBySubscriptionTenTimesASecond(t *testing.T) {
	t.Parallel()
	srv, _ := server(t)
	var dials atomic.Int64
	rdb := redis.NewClient(&redis.Options{
		Addr: srv.Addr(), ContextTimeoutEnabled: true,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	})
	t.Cleanup(func() { rdb.Close() })
	// No flush or probe within the test.
	b := newBudget(t, rdb, "dead-redial", 20, 0, Options{FleetSize: 1, CallTimeout: patient,
		FlushInterval: time.Hour, MaxProbeInterval: time.Hour})
	subscribed(t, rdb, b, 1)
	srv.Kill()
	// No command is sent, so the client's own pool dials nothing (nor
	// starts its one-a-second dial probe): every dial is the subscription's.
	dials.Store(0)
	const window = 4 * time.Second
	time.Sleep(window)
	// A backoff doubling from 100ms dials 5 times in 3.1s; allow twice that.
	if got := dials.Load(); got > 10 {
		t.Errorf("the subscription dialed a dead Redis %d times in %v; want at most 10", got, window)
	}
}
