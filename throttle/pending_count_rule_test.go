package throttle

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jonboulle/clockwork"
)

// Accepts of a cold destination counted from many goroutines at once, by
// Record and by Served alike, are each counted exactly once: what is still
// pending plus what was folded into the window is every accept, the
// first is stamped, and no more than pendingFold-1 stay pending.
func TestColdAcceptsAreCountedExactlyOnceUnderConcurrency(t *testing.T) {
	t.Parallel()
	const goroutines, each = 8, 10_000
	fc := clockwork.NewFakeClock() // never advances: every fold lands in one bucket
	th := &Throttle{}
	d := th.dests.Get("k", 0, newDest)
	var wg sync.WaitGroup
	var served atomic.Int64
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				// Served first, as the Transport asks it; Record when it
				// declines (while the destination's quota is read).
				if (g+i)%2 == 1 && th.Served(d, http.StatusOK, http.Header{}, fc) {
					served.Add(1)
				} else {
					th.Record(d, &Result{Status: http.StatusOK, Header: http.Header{}}, fc)
				}
			}
		}()
	}
	wg.Wait()
	if served.Load() == 0 {
		t.Fatal("no accept went through Served")
	}
	_, acc := th.counts("k")
	pending := d.pending.Load()
	if got := int64(acc) + pending; got != goroutines*each {
		t.Errorf("%v accepts folded + %d pending = %d; want %d", acc, pending, got, goroutines*each)
	}
	if pending >= pendingFold {
		t.Errorf("%d accepts pending; want fewer than %d", pending, pendingFold)
	}
	if d.first.Load() == 0 {
		t.Error("the first accept was not stamped")
	}
}

// countPending's one comparison is n == 1 || n >= pendingFold, for every
// count it can return.
func TestCountPendingEdges(t *testing.T) {
	t.Parallel()
	d := &Dest{}
	newDest(d)
	for n := int64(1); n <= 3*pendingFold; n++ {
		got := d.countPending()
		want := int64(0)
		if n == 1 || n >= pendingFold {
			want = n
		}
		if got != want {
			t.Fatalf("accept %d: countPending = %d; want %d", n, got, want)
		}
	}
}
