package throttle

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// TestPauseEndReleasesHeldOperationsOneAtATime: a server that admits 5
// requests per 2-second window and answers the 6th with a 429 and
// Retry-After to the window's end, no rate-limit fields. 20 operations
// are held for its pause. When the pause ends, one is let go; each
// answer lets the next go; the 429 that ends a window pauses the rest
// again. So the server sees at most one 429 per window, 4 in all for
// 20 operations at 5 a window, never 15 at the pause's end; and an
// operation held is told, through QuotaReleased, when to ask again.
func TestPauseEndReleasesHeldOperationsOneAtATime(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	zero := fc.Now()
	const perWindow, window = 5, 2 * time.Second
	used := map[int64]int{}
	tooMany := map[int64]int{}
	serve := func() Result {
		el := fc.Since(zero)
		w := int64(el / window)
		used[w]++
		if used[w] <= perWindow {
			return Result{Status: 200, Header: http.Header{}, Sent: fc.Now()}
		}
		tooMany[w]++
		return Result{Status: 429, Header: http.Header{}, Sent: fc.Now(), Overload: true,
			RetryAfter: window - el%window, HasRetryAfter: true}
	}
	th := &Throttle{draws: func() float64 { return 1 }, MinRate: -1, MaxReject: 0.01}
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.test/", nil)
	d := th.Dest(req)
	for range perWindow + 1 { // window 0 spent, and its 429
		th.Record(d, new(serve()), fc)
	}
	// Each round, every operation held asks; those admitted are sent at
	// once and answered; a round with none admitted waits for the
	// reset, or for the turn QuotaReleased gives.
	held := 20
	for round := 0; held > 0 && round < 200; round++ {
		admitted := 0
		var reset time.Time
		for range held {
			_, r, err := th.Admit(d, req, fc)
			if err == nil {
				admitted++
				continue
			}
			if err != ErrQuotaExhausted {
				t.Fatalf("held operation: %v; want admitted or ErrQuotaExhausted", err)
			}
			reset = r
		}
		if admitted == 0 {
			if reset.After(fc.Now()) {
				fc.Advance(reset.Sub(fc.Now()))
				continue
			}
			t.Fatalf("round %d: nothing in flight, the reset past, and no operation may go", round)
		}
		turn := th.QuotaReleased(d)
		for range admitted {
			r := serve()
			if r.Status == 200 {
				held--
			}
			th.Record(d, &r, fc)
		}
		if turn != nil {
			select {
			case <-turn:
			default:
				t.Errorf("round %d: answers read, and the operations held were not told to ask again", round)
			}
		}
	}
	total := 0
	for w, n := range tooMany {
		if n > 1 {
			t.Errorf("window %d: %d 429s; want at most 1", w, n)
		}
		total += n
	}
	if held != 0 || total > 5 {
		t.Errorf("%d operations left, %d 429s in all (%v); want 0 left and at most 5, one per window", held, total, tooMany)
	}
}

// TestPauseEndLetsOneOfTheOperationsAskingAtOnceGo: a 429 with
// Retry-After: 1 and no rate-limit fields spends the destination's quota
// for a second (nothing else held) or pauses it (a named quota held);
// at the second's end 16 operations ask at the same instant, on 16
// goroutines. Exactly one is admitted, the others held for its answer,
// however the scheduler interleaves the first look that finds the second
// over with the others: a release starts before any of them can see the
// quota open, and no operation is admitted past the release's turn.
// Repeated 300 times, as the interleaving is the scheduler's.
func TestPauseEndLetsOneOfTheOperationsAskingAtOnceGo(t *testing.T) {
	t.Parallel()
	const asking = 16
	tooMany := http.Header{"Retry-After": {"1"}}
	for _, held := range []http.Header{nil, githubQuota("core", "4999", time.Hour)} {
		for round := range 300 {
			fc := clockwork.NewFakeClockAt(ruleDate)
			th := &Throttle{draws: func() float64 { return 1 }, MinRate: -1}
			if held != nil {
				ask(th, fc, http.MethodGet, "/", http.StatusOK, held)
			}
			ask(th, fc, http.MethodGet, "/", http.StatusTooManyRequests, tooMany)
			fc.Advance(time.Second)
			req := ruleRequest("/")
			d := th.Dest(req)
			var admitted atomic.Int32
			var wg sync.WaitGroup
			gate := make(chan struct{})
			for range asking {
				wg.Go(func() {
					<-gate
					if _, _, err := th.Admit(d, req, fc); err == nil {
						admitted.Add(1)
					}
				})
			}
			close(gate)
			wg.Wait()
			if n := admitted.Load(); n != 1 || d.Idle() {
				t.Fatalf("quota held before the 429 %v, round %d: %d of %d operations admitted at the second's end, destination idle %v; want 1, not idle",
					held, round, n, asking, d.Idle())
			}
		}
	}
}

// TestReleaseTurnGivenBackBeforeTheWaitIsNotMissed: during a release whose
// turn is out, an operation is refused; before it asks QuotaReleased for
// the channel to wait on, the turn's attempt ends without an answer and
// gives the turn back. QuotaReleased then says to ask again at once
// (nil), and the operation is admitted: it does not wait on a channel
// that only the next turn given back would close.
func TestReleaseTurnGivenBackBeforeTheWaitIsNotMissed(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClockAt(ruleDate)
	th := &Throttle{draws: func() float64 { return 1 }, MinRate: -1}
	ask(th, fc, http.MethodGet, "/", http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}})
	fc.Advance(time.Second)
	req := ruleRequest("/")
	d := th.Dest(req)
	if _, _, err := th.Admit(d, req, fc); err != nil {
		t.Fatalf("the first operation after the pause: %v; want the release's turn", err)
	}
	if _, _, err := th.Admit(d, req, fc); err != ErrQuotaExhausted {
		t.Fatalf("an operation while the turn is out: %v; want ErrQuotaExhausted", err)
	}
	th.Record(d, &Result{Sent: fc.Now(), Unheard: true}, fc) // the turn comes back
	if turn := th.QuotaReleased(d); turn != nil {
		select {
		case <-turn:
		default:
			t.Fatal("a turn is free, and QuotaReleased gave a channel still open: the operation would wait for a turn nobody gives back")
		}
	}
	if _, _, err := th.Admit(d, req, fc); err != nil {
		t.Errorf("asking again: %v; want the turn given back", err)
	}
}
