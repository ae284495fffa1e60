package throttle

import (
	"net/http"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// TestReleaseIgnoresTheRefundOfARequestTakenBeforeIt: an operation takes
// a request from GitHub's core quota; a 429 with Retry-After and no
// rate-limit fields (a secondary rate limit) then pauses the
// destination, and the pause ends: the release lets one operation go,
// which takes its turn. The first operation's attempt is not sent after
// all (a refused dial), and its ticket is refunded: that request never
// took a turn of the release, so the release still lets no second
// operation go before an answer arrives.
func TestReleaseIgnoresTheRefundOfARequestTakenBeforeIt(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	th := &Throttle{draws: func() float64 { return 1 }, MinRate: -1, MaxReject: 0.01}
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.test/", nil)
	d := th.Dest(req)
	th.Record(d, &Result{Status: 200, Sent: fc.Now(), Header: http.Header{
		"X-Ratelimit-Limit": {"5000"}, "X-Ratelimit-Remaining": {"4000"}, "X-Ratelimit-Used": {"1000"},
		"X-Ratelimit-Reset": {"4102444800"}, "X-Ratelimit-Resource": {"core"}}}, fc)
	early, _, err := th.Admit(d, req, fc)
	if err != nil || early.q == nil {
		t.Fatalf("an operation under a known quota: %v, ticket %v; want admitted, a request counted", err, early)
	}
	th.Record(d, &Result{Status: 429, Sent: fc.Now(), Header: http.Header{}, Overload: true,
		RetryAfter: time.Second, HasRetryAfter: true}, fc)
	if _, _, err := th.Admit(d, req, fc); err != ErrQuotaExhausted {
		t.Fatalf("an operation during the pause: %v; want held (ErrQuotaExhausted)", err)
	}
	fc.Advance(time.Second)
	if _, _, err := th.Admit(d, req, fc); err != nil {
		t.Fatalf("the first operation at the pause's end: %v; want let go", err)
	}
	if _, _, err := th.Admit(d, req, fc); err != ErrQuotaExhausted {
		t.Fatalf("a second operation before any answer of the release: %v; want held (ErrQuotaExhausted)", err)
	}
	early.Refund()
	if _, _, err := th.Admit(d, req, fc); err != ErrQuotaExhausted {
		t.Errorf("a second operation after the refund of a request taken before the release: %v; want held (ErrQuotaExhausted)", err)
	}
}

// TestReleaseLetsOneGoForAnAttemptRefusedBeforeItWasSent: during a
// release, the operation let go takes the turn, and its attempt is
// refused before it reaches the server (a refused dial): the caller
// refunds its ticket and records the result, which has no response.
// The turn it gave back lets exactly one operation go, not two.
func TestReleaseLetsOneGoForAnAttemptRefusedBeforeItWasSent(t *testing.T) {
	t.Parallel()
	th, d, req, fc := pauseJustEnded()
	first, _, err := th.Admit(d, req, fc)
	if err != nil {
		t.Fatalf("the first operation at the pause's end: %v; want let go", err)
	}
	first.Refund()
	th.Record(d, &Result{Status: 0, Sent: fc.Now()}, fc)
	if _, _, err := th.Admit(d, req, fc); err != nil {
		t.Fatalf("the next operation after the refused attempt: %v; want let go", err)
	}
	if _, _, err := th.Admit(d, req, fc); err != ErrQuotaExhausted {
		t.Errorf("a third operation before any answer of the release: %v; want held (ErrQuotaExhausted)", err)
	}
}

// TestReleaseTurnRefundedLetsTheNextGo: during a release, the operation
// let go takes the turn, and its attempt is then not sent at all (the
// Throttle's draw refused it, a hook panicked): refunding its ticket
// gives the turn back, and the next operation held is let go, with no
// answer and no result recorded.
func TestReleaseTurnRefundedLetsTheNextGo(t *testing.T) {
	t.Parallel()
	th, d, req, fc := pauseJustEnded()
	first, _, err := th.Admit(d, req, fc)
	if err != nil {
		t.Fatalf("the first operation at the pause's end: %v; want let go", err)
	}
	if _, _, err := th.Admit(d, req, fc); err != ErrQuotaExhausted {
		t.Fatalf("a second operation while the first holds the turn: %v; want held (ErrQuotaExhausted)", err)
	}
	first.Refund()
	if _, _, err := th.Admit(d, req, fc); err != nil {
		t.Errorf("the next operation after the turn was refunded: %v; want let go", err)
	}
}

// TestReleaseTurnOfARequestItsQuotaRefusesIsGivenBack: GitHub's core
// quota is spent until its reset an hour away; a 429 naming no quota
// then pauses the destination for a second. When the pause ends, the
// release's turn goes to an operation that core still refuses: it is
// refused until core's reset, and the turn is given back, so the next
// operation is told the same reset, not held for an answer that will
// never come.
func TestReleaseTurnOfARequestItsQuotaRefusesIsGivenBack(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClockAt(ruleDate)
	th := &Throttle{draws: func() float64 { return 1 }, MinRate: -1}
	req := ruleRequest("/repos/a/b")
	d := th.Dest(req)
	th.record(d, &http.Response{StatusCode: 200, Header: githubQuota("core", "0", time.Hour), Request: req}, nil, fc.Now(), fc)
	th.record(d, &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"1"}}, Request: req}, nil, fc.Now(), fc)
	fc.Advance(time.Second)
	want := ruleDate.Add(time.Hour)
	for i := range 2 {
		if _, reset, err := th.Admit(d, req, fc); err != ErrQuotaExhausted || !reset.Equal(want) {
			t.Errorf("operation %d after the pause: %v until %v; want ErrQuotaExhausted until core's reset %v", i+1, err, reset, want)
		}
	}
}

// pauseJustEnded returns a throttle whose destination a 429 with
// Retry-After: 1 and no rate-limit fields paused, a request to it, and a
// fake clock at the pause's end: the next look starts a release.
func pauseJustEnded() (*Throttle, *Dest, *http.Request, *clockwork.FakeClock) {
	fc := clockwork.NewFakeClock()
	th := &Throttle{draws: func() float64 { return 1 }, MinRate: -1, MaxReject: 0.01}
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.test/", nil)
	d := th.Dest(req)
	th.Record(d, &Result{Status: 429, Sent: fc.Now(), Header: http.Header{}, Overload: true,
		RetryAfter: time.Second, HasRetryAfter: true}, fc)
	fc.Advance(time.Second)
	return th, d, req, fc
}

// TestReleaseTurnOfABare429IsGivenBack: during a release, the operation
// let go takes the turn and is answered 429 with no Retry-After and no
// rate-limit fields (a proxy's bare refusal). That 429 names no time to
// pause for, so it pauses nothing; its turn is given back, and the next
// operation held is let go, one at a time as before, not held for an
// answer that will never come. Such 429s are not answers that end the
// release: after releaseAnswers of them it still lets one go at a time.
func TestReleaseTurnOfABare429IsGivenBack(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"no quota known", "a named quota known"} {
		t.Run(name, func(t *testing.T) {
			th, d, req, fc := pauseJustEnded()
			if name == "a named quota known" {
				th, d, req, fc = namedQuotaPauseJustEnded()
			}
			for i := range releaseAnswers + 2 {
				if _, _, err := th.Admit(d, req, fc); err != nil {
					t.Fatalf("operation %d after %d bare 429s: %v; want let go", i+1, i, err)
				}
				if _, _, err := th.Admit(d, req, fc); err != ErrQuotaExhausted {
					t.Fatalf("another operation while operation %d holds the turn: %v; want held (ErrQuotaExhausted)", i+1, err)
				}
				th.Record(d, &Result{Status: 429, Sent: fc.Now(), Header: http.Header{}, Overload: true}, fc)
			}
		})
	}
}

// namedQuotaPauseJustEnded is pauseJustEnded for a destination that
// announced GitHub's core quota (4,000 left of 5,000) before a 429 with
// Retry-After: 1 and no rate-limit fields (a secondary rate limit)
// paused it.
func namedQuotaPauseJustEnded() (*Throttle, *Dest, *http.Request, *clockwork.FakeClock) {
	fc := clockwork.NewFakeClock()
	th := &Throttle{draws: func() float64 { return 1 }, MinRate: -1, MaxReject: 0.01}
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.test/", nil)
	d := th.Dest(req)
	th.Record(d, &Result{Status: 200, Sent: fc.Now(), Header: http.Header{
		"X-Ratelimit-Limit": {"5000"}, "X-Ratelimit-Remaining": {"4000"}, "X-Ratelimit-Used": {"1000"},
		"X-Ratelimit-Reset": {"4102444800"}, "X-Ratelimit-Resource": {"core"}}}, fc)
	th.Record(d, &Result{Status: 429, Sent: fc.Now(), Header: http.Header{}, Overload: true,
		RetryAfter: time.Second, HasRetryAfter: true}, fc)
	fc.Advance(time.Second)
	return th, d, req, fc
}
