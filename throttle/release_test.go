package throttle

import (
	"net/http"
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
