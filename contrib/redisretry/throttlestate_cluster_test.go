package redisretry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/httpretry/httpretry/throttle"
)

// countingHandler is a slog.Handler that counts the records it gets.
type countingHandler struct{ n atomic.Int64 }

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(context.Context, slog.Record) error {
	h.n.Add(1)
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

// TestThrottleStateSharesCountsOnACluster: two processes on a Redis
// Cluster of three masters, each with a cluster client of its own. A
// destination's hash, its publication marker and its channel share one
// hash tag, the destination's key, so each destination's commands go to
// the master of its slot: three destinations, one on each master. B
// learns each destination's outage from A's answers and refuses, and no
// command fails (a CROSSSLOT or MOVED error would be logged).
func TestThrottleStateSharesCountsOnACluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3, 0)
	masters, err := c.Masters()
	if err != nil {
		t.Fatal(err)
	}
	probe := c.Client(t)
	const prefix = "ts-cluster"
	hosts := map[string]string{} // master address → a destination whose key it serves
	for i := 0; len(hosts) < len(masters) && i < 1000; i++ {
		host := fmt.Sprintf("api%d.example", i)
		slot, err := probe.ClusterKeySlot(context.Background(), prefix+"{"+host+"}").Result()
		if err != nil {
			t.Fatal(err)
		}
		owner, err := c.Owner(int(slot))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := hosts[owner.Addr()]; !ok {
			hosts[owner.Addr()] = host
		}
	}
	if len(hosts) != len(masters) {
		t.Fatalf("destinations on %d masters; want one on each of %d", len(hosts), len(masters))
	}
	var logged countingHandler
	process := func() *fleetProcess {
		st, err := NewThrottleState(c.Client(t), prefix, ThrottleStateOptions{Share: 1, Logger: slog.New(&logged)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return &fleetProcess{th: drawing(&throttle.Throttle{Shared: st}, func() float64 { return 0.5 }), state: st}
	}
	a, b := process(), process()
	for master, host := range hosts {
		if b.refused(host) {
			t.Fatalf("%s (on %s): B refused before anyone counted anything", host, master)
		}
		eventually(t, "B refuses "+host+" (on "+master+") on A's overload answers", func() bool {
			a.record(host, 20, true)
			return b.refused(host)
		})
	}
	if b.refused("never.example") {
		t.Error("B refused a destination nobody signalled")
	}
	if n := logged.n.Load(); n != 0 {
		t.Errorf("%d failures logged; want none", n)
	}
	if err := errors.Join(a.state.Close(), b.state.Close()); err != nil {
		t.Error(err)
	}
}
