package throttle

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// TestQuotaSpentWithoutALimitIsNotRenewedSpent: a response says no
// request is left for 10s and gives no limit (X-RateLimit-Remaining 0,
// X-RateLimit-Reset 10, no X-RateLimit-Limit): the quota is spent until
// then; at the reset the new window's count is not known, so it is not
// taken as 0: the first operation is admitted, to learn it.
func TestQuotaSpentWithoutALimitIsNotRenewedSpent(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClockAt(ruleDate)
	th := &Throttle{draws: func() float64 { return 1 }}
	h := http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"10"}}
	if _, err := ask(th, fc, "GET", "/x", http.StatusOK, h); err != nil {
		t.Fatalf("first request: %v", err)
	}
	if _, err := ask(th, fc, "GET", "/x", 0, nil); !errors.Is(err, ErrQuotaExhausted) {
		t.Fatalf("with none left: %v; want ErrQuotaExhausted", err)
	}
	fc.Advance(10 * time.Second)
	if _, err := ask(th, fc, "GET", "/x", 0, nil); err != nil {
		t.Errorf("at the reset, the new window's count not known: %v; want admitted", err)
	}
}

// TestQuotaWindowOfNoLengthIsNotRenewed: a response says 5 a window, none
// left, and a reset of 0 (X-RateLimit-Reset-After 0): the window ends as
// it is announced, and its length is not known, so it is not renewed
// with the limit; the next operation is admitted, to learn the count,
// and no window is held after it.
func TestQuotaWindowOfNoLengthIsNotRenewed(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClockAt(ruleDate)
	th := &Throttle{draws: func() float64 { return 1 }}
	h := http.Header{"X-Ratelimit-Limit": {"5"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset-After": {"0"}}
	if _, err := ask(th, fc, "GET", "/x", http.StatusOK, h); err != nil {
		t.Fatalf("first request: %v", err)
	}
	if _, err := ask(th, fc, "GET", "/x", 0, nil); err != nil {
		t.Errorf("after a window that reset as it was announced: %v; want admitted", err)
	}
	d := th.Dest(httptest.NewRequest("GET", "https://api.test/x", nil))
	if _, held := d.quota.current(&d.quota.slots[0], fc.Now()); held {
		t.Error("the window of no length is held after its reset; want dropped")
	}
}
