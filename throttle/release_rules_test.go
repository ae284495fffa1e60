package throttle

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// pausedGitHub is a destination holding GitHub's core quota (4,999 left)
// whose answer of a 429 with Retry-After 60 and no rate-limit fields
// paused it for a minute; the fake clock stands at the pause's end. It
// returns the throttle, the clock, and a function that records an answer
// without rate-limit fields, as one of the operations let go would get.
func pausedGitHub(t *testing.T) (*Throttle, *clockwork.FakeClock, func()) {
	t.Helper()
	fc := clockwork.NewFakeClockAt(ruleDate)
	th := &Throttle{draws: func() float64 { return 1 }}
	ask(th, fc, "GET", "/repos/a/b", http.StatusOK, githubQuota("core", "4999", time.Hour))
	ask(th, fc, "GET", "/repos/a/b", http.StatusTooManyRequests, http.Header{"Retry-After": {"60"}})
	fc.Advance(time.Minute)
	answer := func() {
		req := httptest.NewRequest("GET", "https://api.test/repos/a/b", nil)
		th.record(th.Dest(req), &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Request: req}, nil, fc.Now(), fc)
	}
	return th, fc, answer
}

// TestQuotaDestinationPauseEndsInAReleaseOfOneAtATime: at the end of a
// pause of the whole destination (a 429 naming none of the named quotas
// held), the operations held are let go one at a time: the first is
// admitted, the next is refused until an answer arrives, and the answer
// lets one more go.
func TestQuotaDestinationPauseEndsInAReleaseOfOneAtATime(t *testing.T) {
	t.Parallel()
	th, fc, answer := pausedGitHub(t)
	if _, err := ask(th, fc, "GET", "/repos/a/b", 0, nil); err != nil {
		t.Fatalf("the first operation at the pause's end: %v; want admitted", err)
	}
	if _, err := ask(th, fc, "GET", "/repos/a/b", 0, nil); !errors.Is(err, ErrQuotaExhausted) {
		t.Errorf("the second, before any answer: %v; want ErrQuotaExhausted", err)
	}
	answer()
	if _, err := ask(th, fc, "GET", "/repos/a/b", 0, nil); err != nil {
		t.Errorf("the second, after the first's answer: %v; want admitted", err)
	}
}

// TestQuotaReleaseEndsAtTheTenthAnswerWithoutA429: after a pause, the
// operations held go one at a time until 10 answers in a row came
// without a 429: after 9, one operation goes and the next is held; at
// the 10th the release ends, and every operation is admitted at once.
func TestQuotaReleaseEndsAtTheTenthAnswerWithoutA429(t *testing.T) {
	t.Parallel()
	th, fc, answer := pausedGitHub(t)
	for i := range releaseAnswers - 1 {
		if _, err := ask(th, fc, "GET", "/repos/a/b", 0, nil); err != nil {
			t.Fatalf("operation %d of the release, after %d answers: %v; want admitted", i+1, i, err)
		}
		answer()
	}
	if _, err := ask(th, fc, "GET", "/repos/a/b", 0, nil); err != nil {
		t.Fatalf("operation %d, after %d answers: %v; want admitted", releaseAnswers, releaseAnswers-1, err)
	}
	if _, err := ask(th, fc, "GET", "/repos/a/b", 0, nil); !errors.Is(err, ErrQuotaExhausted) {
		t.Errorf("the next, before the %dth answer: %v; want ErrQuotaExhausted", releaseAnswers, err)
	}
	answer()
	for i := range 3 {
		if _, err := ask(th, fc, "GET", "/repos/a/b", 0, nil); err != nil {
			t.Errorf("operation %d after the %dth answer: %v; want admitted, the release ended", i+1, releaseAnswers, err)
		}
	}
}
