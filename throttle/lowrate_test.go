package throttle

import (
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// lowRateOp makes one operation of up to three attempts against a server
// whose attempt i fails when fail(i) says so: Admit before the first,
// AdmitRetry before each retry, 100ms of backoff between them. It returns
// how many of its attempts the throttle refused (0 or 1) and whether the
// operation succeeded.
func lowRateOp(th *Throttle, d *Dest, fc *clockwork.FakeClock, fail func(i int) bool) (refused int, ok bool) {
	for i := range 3 {
		var err error
		if i == 0 {
			_, err = th.admit(d, fc)
		} else {
			fc.Advance(100 * time.Millisecond)
			err = th.AdmitRetry(d, fc)
		}
		if err != nil {
			return 1, false
		}
		status := http.StatusOK
		if fail(i) {
			status = http.StatusServiceUnavailable
		}
		th.record(d, &http.Response{StatusCode: status, Header: http.Header{}}, nil, time.Time{}, fc)
		if status == http.StatusOK {
			return 0, true
		}
	}
	return 0, false
}

// TestThrottleTwoFailuresInARowOfAHealthyLowRateDestinationAreNotRefused:
// a destination called once a second (and at 1.5 and 4 a second), every
// call accepted for 30s, then one operation whose first two attempts get
// 503: its third attempt is admitted even by a draw of 0. The window
// holds one or two requests at such rates; the counts reach back over the
// accepts before the failures, and a server that accepted most of what it
// was sent is not overloaded.
func TestThrottleTwoFailuresInARowOfAHealthyLowRateDestinationAreNotRefused(t *testing.T) {
	t.Parallel()
	for _, rate := range []float64{1, 1.5, 4} {
		fc := clockwork.NewFakeClock()
		th := &Throttle{draws: func() float64 { return 0 }}
		d := th.dests.Get("k", 0, newDest)
		every := time.Duration(float64(time.Second) / rate)
		for range int(30 * rate) {
			if refused, _ := lowRateOp(th, d, fc, func(int) bool { return false }); refused != 0 {
				t.Fatalf("%v/s: a healthy operation was refused", rate)
			}
			fc.Advance(every)
		}
		refused, ok := lowRateOp(th, d, fc, func(i int) bool { return i < 2 })
		if refused != 0 || !ok {
			t.Errorf("%v/s: two 503s in a row, then the third attempt: refused %d, succeeded %v; want admitted and succeeded", rate, refused, ok)
		}
	}
}

// TestThrottleRefusesNothingAtLowRateWithRandom503s: 4,000 operations at
// 1.5 a second to a server that answers 2% of attempts at random with
// 503, each operation up to three attempts, with the default Throttle
// and a real random draw: none is refused, so every operation that
// succeeds without the throttle succeeds with it. The server accepts 98%
// of what it is sent: it is not overloaded.
func TestThrottleRefusesNothingAtLowRateWithRandom503s(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	rng := rand.New(rand.NewPCG(1, 2))
	th := &Throttle{draws: rng.Float64}
	d := th.dests.Get("k", 0, newDest)
	faults := rand.New(rand.NewPCG(3, 4))
	refused, failed, failures := 0, 0, 0
	for range 4000 {
		// Exponential gaps: Poisson arrivals at 1.5 a second.
		gap := time.Duration(faults.ExpFloat64() / 1.5 * float64(time.Second))
		r, ok := lowRateOp(th, d, fc, func(int) bool {
			f := faults.Float64() < 0.02
			if f {
				failures++
			}
			return f
		})
		refused += r
		if !ok {
			failed++
		}
		fc.Advance(gap)
	}
	if refused != 0 {
		t.Errorf("refused %d of 4000 operations (%d failed, %d 503s); want 0", refused, failed, failures)
	}
	if failures < 40 {
		t.Fatalf("only %d 503s were drawn; the test needs about 80", failures)
	}
}

// TestThrottleRefusesAtLowRateDuringAnOutage: the same destination at 1.5
// operations a second, every attempt failing for 20s: once the counts
// reach back over the outage alone, most operations are refused, so that
// a low-rate caller still relieves a dead server.
func TestThrottleRefusesAtLowRateDuringAnOutage(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	th := &Throttle{draws: evenDraws()}
	d := th.dests.Get("k", 0, newDest)
	every := time.Second * 2 / 3
	for range 30 {
		lowRateOp(th, d, fc, func(int) bool { return false })
		fc.Advance(every)
	}
	refused, offered := 0, 0
	for i := range 30 {
		r, _ := lowRateOp(th, d, fc, func(int) bool { return true })
		if i >= 6 { // 4s in: the counts no longer reach back to before the outage
			offered++
			refused += r
		}
		fc.Advance(every)
	}
	if refused < offered*3/4 {
		t.Errorf("outage at 1.5/s: %d of %d operations refused; want at least 75%%", refused, offered)
	}
}
