package throttle

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// quotaAnswer is a 200 saying remaining requests are left of a quota
// that resets in a minute.
func quotaAnswer(remaining string) Result {
	h := http.Header{}
	h.Set("X-RateLimit-Remaining", remaining)
	h.Set("X-RateLimit-Reset", "60")
	return Result{Status: 200, Header: h}
}

// heldSlot returns the slot of d's one quota, failing when none is held.
func heldSlot(t *testing.T, d *Dest) *quotaSlot {
	t.Helper()
	for i := range d.quota.slots {
		if d.quota.slots[i].until.Load() != 0 {
			return &d.quota.slots[i]
		}
	}
	t.Fatal("no quota held")
	return nil
}

// TestRecordCanceledEndsItsQuotaCountInFlight: two attempts take from a
// known quota and are counted in flight; the one answered ends its count
// when its answer is read, the one canceled without an answer when it is
// recorded as Canceled, so that no count stands for an answer still to
// come.
func TestRecordCanceledEndsItsQuotaCountInFlight(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	th := &Throttle{}
	req := httptest.NewRequest("GET", "http://api.test/", nil)
	d := th.Dest(req)
	th.Record(d, new(quotaAnswer("50")), fc)
	slot := heldSlot(t, d)
	for range 2 {
		if _, _, ok := th.TakeQuota(d, req, fc); !ok {
			t.Fatal("TakeQuota refused with 50 left")
		}
	}
	if n := slot.inflight.Load(); n != 2 {
		t.Fatalf("%d in flight after two takes; want 2", n)
	}
	answered := quotaAnswer("48")
	answered.Sent = fc.Now()
	th.Record(d, &answered, fc)
	if n := slot.inflight.Load(); n != 1 {
		t.Fatalf("%d in flight after one answer; want 1", n)
	}
	th.Record(d, &Result{Canceled: true, Sent: fc.Now()}, fc)
	if n := slot.inflight.Load(); n != 0 {
		t.Errorf("%d in flight after the loser was recorded as canceled; want 0", n)
	}
}

// TestTicketRefundGivesBackOnce: a request taken from the quota for an
// attempt that is then not sent is given back by its ticket once; a
// second Refund, and the zero Ticket's, give back nothing.
func TestTicketRefundGivesBackOnce(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	th := &Throttle{}
	req := httptest.NewRequest("GET", "http://api.test/", nil)
	d := th.Dest(req)
	th.Record(d, new(quotaAnswer("5")), fc)
	slot := heldSlot(t, d)
	ticket, _, ok := th.TakeQuota(d, req, fc)
	if !ok || slot.left.Load() != 4 {
		t.Fatalf("take: ok %v, %d left; want true, 4", ok, slot.left.Load())
	}
	ticket.Refund()
	ticket.Refund()
	var zero Ticket
	zero.Refund()
	if got := slot.left.Load(); got != 5 {
		t.Errorf("%d left after refunds; want 5: one request given back", got)
	}
	if got := slot.inflight.Load(); got != 0 {
		t.Errorf("%d in flight after the refund; want 0", got)
	}
}

// TestRecordCountsByWhatTheServerSaid: on a hot destination, an answer
// counts as a request and an accept, an overload signal as a request
// alone, an attempt the server said nothing of for neither, a loser
// canceled for a healthy answer as an accept, and one canceled for an
// overload signal as a request alone.
func TestRecordCountsByWhatTheServerSaid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name             string
		r                Result
		wantReq, wantAcc float64
	}{
		{"answered", Result{Status: 200}, 1, 1},
		{"overload signal", Result{Status: 503, Overload: true}, 1, 0},
		{"error signalling overload", Result{Overload: true}, 1, 0},
		{"unheard", Result{Unheard: true, Overload: true}, 0, 0},
		{"canceled for a healthy answer", Result{Canceled: true}, 1, 1},
		{"canceled for an overload signal", Result{Canceled: true, Overload: true}, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fc := clockwork.NewFakeClock()
			th := &Throttle{}
			req := httptest.NewRequest("GET", "http://api.test/", nil)
			d := th.Dest(req)
			th.Record(d, &Result{Status: 503, Overload: true}, fc) // hot from now
			req0, acc0 := th.counts("api.test")
			th.Record(d, &tt.r, fc)
			req1, acc1 := th.counts("api.test")
			if req1-req0 != tt.wantReq || acc1-acc0 != tt.wantAcc {
				t.Errorf("counted %v requests, %v accepts; want %v, %v", req1-req0, acc1-acc0, tt.wantReq, tt.wantAcc)
			}
		})
	}
}

// TestAdmitIdleDestinationReadsNoClock: a destination with no quota that
// signalled nothing is admitted without a clock reading; one that did is
// asked with one.
func TestAdmitIdleDestinationReadsNoClock(t *testing.T) {
	t.Parallel()
	th := &Throttle{draws: func() float64 { return 0.99 }}
	req := httptest.NewRequest("GET", "http://api.test/", nil)
	d := th.Dest(req)
	c := &countingClock{now: time.Unix(1_700_000_000, 0)}
	if _, _, err := th.Admit(d, req, c); err != nil || c.reads != 0 {
		t.Fatalf("idle: err %v, %d clock reads; want nil, 0", err, c.reads)
	}
	th.Record(d, &Result{Status: 503, Overload: true}, c)
	c.reads = 0
	if _, _, err := th.Admit(d, req, c); err != nil || c.reads == 0 {
		t.Errorf("hot: err %v, %d clock reads; want nil and the clock read", err, c.reads)
	}
}

// countingClock is a fixed clock that counts its readings.
type countingClock struct {
	now   time.Time
	reads int
}

func (c *countingClock) Now() time.Time { c.reads++; return c.now }
