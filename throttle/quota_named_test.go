package throttle

import (
	"net/http"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// TestQuotaSpentNamedEndsWithThePauseAndReadsEveryQuotaHeld: QuotaSpent
// asked for the quota an answer named reads that quota wherever the
// destination holds it, the first one learned included: core, learned
// first and spent, is spent though search has requests left. While a
// 429 naming none of them pauses the destination, every quota reads as
// spent until the pause's end; at that instant core reads as its own
// count again.
func TestQuotaSpentNamedEndsWithThePauseAndReadsEveryQuotaHeld(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClockAt(ruleDate)
	th := &Throttle{draws: func() float64 { return 1 }}
	ask(th, fc, "GET", "/repos/a/b", http.StatusOK, githubQuota("core", "0", time.Hour))
	ask(th, fc, "GET", "/search", http.StatusOK, githubQuota("search", "29", time.Minute))
	d := th.Dest(ruleRequest("/"))
	if reset, spent := th.QuotaSpent(d, githubQuota("core", "0", time.Hour), fc.Now()); !spent || !reset.Equal(ruleDate.Add(time.Hour)) {
		t.Errorf("core, learned first and spent: %v until %v; want spent until %v", spent, reset, ruleDate.Add(time.Hour))
	}

	fc2 := clockwork.NewFakeClockAt(ruleDate)
	th2 := &Throttle{draws: func() float64 { return 1 }}
	ask(th2, fc2, "GET", "/repos/a/b", http.StatusOK, githubQuota("core", "4999", time.Hour))
	ask(th2, fc2, "GET", "/repos/a/b", http.StatusTooManyRequests, http.Header{"Retry-After": {"60"}})
	d2 := th2.Dest(ruleRequest("/"))
	core := githubQuota("core", "4999", time.Hour)
	if reset, spent := th2.QuotaSpent(d2, core, ruleDate.Add(time.Minute-time.Nanosecond)); !spent || !reset.Equal(ruleDate.Add(time.Minute)) {
		t.Errorf("core in the pause: %v until %v; want spent until the pause's end, %v", spent, reset, ruleDate.Add(time.Minute))
	}
	if _, spent := th2.QuotaSpent(d2, core, ruleDate.Add(time.Minute)); spent {
		t.Error("core at the pause's end, 4,999 left: spent; want not")
	}
}

// ruleRequest is a GET of path at api.test.
func ruleRequest(path string) *http.Request {
	req, _ := http.NewRequest(http.MethodGet, "https://api.test"+path, nil)
	return req
}
