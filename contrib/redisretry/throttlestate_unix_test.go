//go:build unix

package redisretry

import (
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
)

// TestThrottleStateRedisAwayNeverBlocksAndFallsBackToLocalCounts: with
// Redis frozen (SIGSTOP: a call would wait forever), decisions and
// results never wait, the fleet's counts stop being used after Stale,
// and a process decides on its own counts alone: refused on its own
// overload answers, admitted when it has none.
func TestThrottleStateRedisAwayNeverBlocksAndFallsBackToLocalCounts(t *testing.T) {
	t.Parallel()
	s, _ := server(t)
	o := ThrottleStateOptions{Share: 1, Stale: 300 * time.Millisecond, CallTimeout: 100 * time.Millisecond}
	a := newFleetProcess(t, s.Addr(), "ts-away", o)
	b := newFleetProcess(t, s.Addr(), "ts-away", o)
	eventually(t, "B refuses on A's counts", func() bool {
		a.record("api.example", 20, true)
		return b.refused("api.example")
	})
	s.Freeze()
	defer s.Thaw()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 2000 {
			a.record("api.example", 1, true)
			b.refused("api.example")
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("2,000 decisions and results did not finish in 20s with Redis frozen: a caller waited for Redis")
	}
	eventually(t, "the fleet's counts go stale", func() bool { return !b.state.Hot("api.example") })
	var req, acc [fleetRing]float64
	b.state.Counts("api.example", time.Now(), DefaultBucket, req[:], acc[:])
	if req != ([fleetRing]float64{}) || acc != req {
		t.Errorf("stale fleet counts still added: %v requests, %v accepts", req, acc)
	}
	// A Throttle of B's with no counts of its own decides on its own
	// counts: it admits.
	c := &fleetProcess{th: drawing(&throttle.Throttle{Shared: b.state}, func() float64 { return 0.5 })}
	if c.refused("api.example") {
		t.Error("refused on stale fleet counts")
	}
	// A's own 2,000 overload answers refuse it without the fleet.
	if !a.refused("api.example") {
		t.Error("A admits with its own window full of overload answers")
	}
}
