package throttle

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// ruleDate is when the tests of this file start, on a fake clock.
var ruleDate = time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC)

// githubQuota is GitHub's announcement of resource's quota: limit 5000,
// remaining left, resetting in reset from ruleDate.
func githubQuota(resource, left string, reset time.Duration) http.Header {
	return http.Header{"Date": {ruleDate.Format(http.TimeFormat)}, "X-Ratelimit-Limit": {"5000"},
		"X-Ratelimit-Remaining": {left}, "X-Ratelimit-Reset": {itoa(ruleDate.Add(reset).Unix())},
		"X-Ratelimit-Resource": {resource}}
}

// ask sends method path to api.test through th at fc's time, recording
// status and h as the answer (a 429's Retry-After read as the Transport
// reads it) when status is not 0 and Admit admits it; it returns Admit's
// reset and error.
func ask(th *Throttle, fc *clockwork.FakeClock, method, path string, status int, h http.Header) (time.Time, error) {
	req := httptest.NewRequest(method, "https://api.test"+path, nil)
	d := th.Dest(req)
	_, reset, err := th.Admit(d, req, fc)
	if err == nil && status != 0 {
		if h == nil {
			h = http.Header{}
		}
		th.record(d, &http.Response{StatusCode: status, Header: h, Request: req}, nil, fc.Now(), fc)
	}
	return reset, err
}

// TestQuotaErrorMatchesErrThrottledOnly: a refusal for a spent quota
// matches ErrThrottled too, so that a caller handling every local
// refusal handles it; the throttle's draw is not a spent quota, and a
// spent quota is no other error.
func TestQuotaErrorMatchesErrThrottledOnly(t *testing.T) {
	t.Parallel()
	if !errors.Is(ErrQuotaExhausted, ErrThrottled) {
		t.Error("errors.Is(ErrQuotaExhausted, ErrThrottled) = false; want true")
	}
	if errors.Is(ErrThrottled, ErrQuotaExhausted) {
		t.Error("errors.Is(ErrThrottled, ErrQuotaExhausted) = true; want false")
	}
	if errors.Is(ErrQuotaExhausted, io.EOF) {
		t.Error("errors.Is(ErrQuotaExhausted, io.EOF) = true; want false")
	}
}

// TestQuota429NamingNoneOfTheNamedQuotasPausesTheDestinationForItsRetryAfter:
// a destination holding GitHub's named core quota (4,999 left) answers a
// 429 with Retry-After 60 and no rate-limit fields (a secondary limit):
// the 429 does not say which quota it spent, so every route is refused,
// with the pause's end as the reset, up to the last nanosecond of the
// minute; at its end the first operation is admitted again.
func TestQuota429NamingNoneOfTheNamedQuotasPausesTheDestinationForItsRetryAfter(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClockAt(ruleDate)
	th := &Throttle{draws: func() float64 { return 1 }}
	if _, err := ask(th, fc, "GET", "/repos/a/b", http.StatusOK, githubQuota("core", "4999", time.Hour)); err != nil {
		t.Fatalf("first request: %v", err)
	}
	if _, err := ask(th, fc, "GET", "/repos/a/b", http.StatusTooManyRequests, http.Header{"Retry-After": {"60"}}); err != nil {
		t.Fatalf("second request: %v", err)
	}
	ends := ruleDate.Add(time.Minute)
	for _, path := range []string{"/repos/a/b", "/users/x", "/search/code"} {
		reset, err := ask(th, fc, "GET", path, 0, nil)
		if !errors.Is(err, ErrQuotaExhausted) || !reset.Equal(ends) {
			t.Errorf("GET %s in the pause: %v, reset %v; want ErrQuotaExhausted, reset %v", path, err, reset, ends)
		}
	}
	fc.Advance(time.Minute - time.Nanosecond)
	if _, err := ask(th, fc, "GET", "/repos/a/b", 0, nil); !errors.Is(err, ErrQuotaExhausted) {
		t.Errorf("a nanosecond before the pause ends: %v; want ErrQuotaExhausted", err)
	}
	fc.Advance(time.Nanosecond)
	if _, err := ask(th, fc, "GET", "/repos/a/b", http.StatusOK, githubQuota("core", "4998", time.Hour)); err != nil {
		t.Errorf("at the pause's end: %v; want admitted", err)
	}
}

// TestQuotaRouteOfTheSpentQuotaIsRefusedOthersGo: GitHub's search (29
// left) and core (spent) quotas held, each named by the answers of its
// routes: a request on a route whose answers named core is refused until
// core's reset; one on search's route, or on a route no answer named
// yet, is sent.
func TestQuotaRouteOfTheSpentQuotaIsRefusedOthersGo(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClockAt(ruleDate)
	th := &Throttle{draws: func() float64 { return 1 }}
	ask(th, fc, "GET", "/search", http.StatusOK, githubQuota("search", "29", time.Minute))
	ask(th, fc, "GET", "/repos/a/b", http.StatusOK, githubQuota("core", "0", time.Hour))
	for _, tt := range []struct {
		method, path string
		refused      bool
	}{
		{"GET", "/repos/a/b", true},
		{"GET", "/search", false},
		{"GET", "/users/e", false},
	} {
		reset, err := ask(th, fc, tt.method, tt.path, 0, nil)
		if errors.Is(err, ErrQuotaExhausted) != tt.refused {
			t.Errorf("%s %s with core spent: %v; want refused %v", tt.method, tt.path, err, tt.refused)
		}
		if want := ruleDate.Add(time.Hour); tt.refused && !reset.Equal(want) {
			t.Errorf("%s %s: reset %v; want core's, %v", tt.method, tt.path, reset, want)
		}
	}
}

// TestQuotaRouteOfASpentQuotaIsKeptWhileOtherRoutesComeAndGo: search
// spent for an hour (a 429 naming it), core with plenty left; then 40
// calls to distinct routes (object IDs in the first path segment), each
// drawing from core: the route known to draw from the spent search quota
// is not forgotten to make room for them, and the next search is
// refused until search's reset.
func TestQuotaRouteOfASpentQuotaIsKeptWhileOtherRoutesComeAndGo(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClockAt(ruleDate)
	th := &Throttle{draws: func() float64 { return 1 }}
	ask(th, fc, "GET", "/repos/a/b", http.StatusOK, githubQuota("core", "4999", time.Hour))
	ask(th, fc, "GET", "/search", http.StatusTooManyRequests, githubQuota("search", "0", time.Hour))
	for i := range 40 {
		fc.Advance(time.Second)
		if _, err := ask(th, fc, "GET", "/"+itoa(int64(4711+i)), http.StatusOK, githubQuota("core", itoa(int64(4998-i)), time.Hour)); err != nil {
			t.Fatalf("call %d to a route of core: %v; want sent", i, err)
		}
	}
	if _, err := ask(th, fc, "GET", "/search", 0, nil); !errors.Is(err, ErrQuotaExhausted) {
		t.Errorf("search after 40 other routes: %v; want ErrQuotaExhausted", err)
	}
}

// TestQuotaSpentReportsTheQuotaTheAnswerNamed: QuotaSpent, asked before a
// retry, reports the quota the attempt's answer named when the
// destination holds it (search, with 29 left: not spent, though core
// is; core: spent until its reset), every quota held otherwise (spent
// only once search is spent too, until the first reset), and nothing
// for a destination without a quota or a Throttle that ignores quotas.
func TestQuotaSpentReportsTheQuotaTheAnswerNamed(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClockAt(ruleDate)
	th := &Throttle{draws: func() float64 { return 1 }}
	ask(th, fc, "GET", "/search", http.StatusOK, githubQuota("search", "29", time.Minute))
	ask(th, fc, "GET", "/repos/a/b", http.StatusOK, githubQuota("core", "0", time.Hour))
	d := th.Dest(httptest.NewRequest("GET", "https://api.test/", nil))
	if _, spent := th.QuotaSpent(d, githubQuota("search", "29", time.Minute), fc.Now()); spent {
		t.Error("QuotaSpent after an answer naming search, 29 left: spent; want not")
	}
	if reset, spent := th.QuotaSpent(d, githubQuota("core", "0", time.Hour), fc.Now()); !spent || !reset.Equal(ruleDate.Add(time.Hour)) {
		t.Errorf("QuotaSpent after an answer naming core: %v, %v; want spent until %v", spent, reset, ruleDate.Add(time.Hour))
	}
	if _, spent := th.QuotaSpent(d, githubQuota("other", "5", time.Minute), fc.Now()); spent {
		t.Error("QuotaSpent after an answer naming a quota not held, search with requests left: spent; want not")
	}
	if _, spent := th.QuotaSpent(d, nil, fc.Now()); spent {
		t.Error("QuotaSpent without an answer's header, search with requests left: spent; want not")
	}
	ask(th, fc, "GET", "/search", http.StatusOK, githubQuota("search", "0", time.Minute))
	if reset, spent := th.QuotaSpent(d, nil, fc.Now()); !spent || !reset.Equal(ruleDate.Add(time.Minute)) {
		t.Errorf("QuotaSpent without an answer's header, every quota spent: %v, %v; want spent until %v, search's reset, the first", spent, reset, ruleDate.Add(time.Minute))
	}
	other := th.Dest(httptest.NewRequest("GET", "https://other.test/", nil))
	if _, spent := th.QuotaSpent(other, nil, fc.Now()); spent {
		t.Error("QuotaSpent of a destination without a quota: spent; want not")
	}
	ignoring := &Throttle{IgnoreQuota: true}
	ig := ignoring.Dest(httptest.NewRequest("GET", "https://api.test/", nil))
	ig.quota.until.Store(stamp(ruleDate.Add(time.Hour)))
	if _, spent := ignoring.QuotaSpent(ig, nil, fc.Now()); spent {
		t.Error("QuotaSpent of a Throttle that ignores quotas: spent; want never")
	}
}

// apfAnswer is a Kubernetes API server's answer of the priority level
// named level: a 429 carries Retry-After ra.
func apfAnswer(level, ra string) http.Header {
	h := http.Header{"X-Kubernetes-Pf-Flowschema-Uid": {"fs-" + level}, "X-Kubernetes-Pf-Prioritylevel-Uid": {level}}
	if ra != "" {
		h.Set("Retry-After", ra)
	}
	return h
}

// TestQuotaAPF429PausesOnlyTheRoutesOfItsPriorityLevel: the apps routes
// are in the saturated priority level "workload-low", answered with 429
// and Retry-After 5, the lease routes in "leader-election", answered 200.
// The deployments' route is refused until the Retry-After ends (a later
// 429 of the level with Retry-After 10 moves the end on), up to its last
// nanosecond; the controller's lease renewal and a route no answer named
// yet still go. At the end, the deployments are sent again.
func TestQuotaAPF429PausesOnlyTheRoutesOfItsPriorityLevel(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClockAt(ruleDate)
	th := &Throttle{draws: func() float64 { return 1 }}
	const deployments, leases = "/apis/apps/v1/deployments", "/apis/coordination.k8s.io/v1/leases"
	ask(th, fc, "GET", leases, http.StatusOK, apfAnswer("leader-election", ""))
	ask(th, fc, "GET", deployments, http.StatusTooManyRequests, apfAnswer("workload-low", "5"))
	check := func(when, path string, refused bool, reset time.Time) {
		t.Helper()
		at, err := ask(th, fc, "GET", path, 0, nil)
		if errors.Is(err, ErrQuotaExhausted) != refused || (refused && !at.Equal(reset)) {
			t.Errorf("%s, GET %s: %v, reset %v; want refused %v (until %v)", when, path, err, at, refused, reset)
		}
	}
	check("in the pause", deployments, true, ruleDate.Add(5*time.Second))
	check("in the pause", leases, false, time.Time{})
	check("in the pause", "/api/v1/pods", false, time.Time{})
	fc.Advance(time.Second)
	// The 429 of a retry that went before the pause.
	req := httptest.NewRequest("GET", "https://api.test"+deployments, nil)
	th.record(th.Dest(req), &http.Response{StatusCode: http.StatusTooManyRequests, Header: apfAnswer("workload-low", "10"), Request: req}, nil, fc.Now(), fc)
	ends := ruleDate.Add(11 * time.Second)
	check("after a second 429", deployments, true, ends)
	fc.Advance(10*time.Second - time.Nanosecond)
	check("a nanosecond before the end", deployments, true, ends)
	fc.Advance(time.Nanosecond)
	check("at the end", deployments, false, time.Time{})
}

// TestQuotaAPFLevelsEachEndAtTheirOwnEndAndTheFirstToEndMakesRoom: a
// destination keeps the pauses of 8 priority levels. Levels 0 and 1 are
// paused for 10s, levels 2 to 7 for 20s to 25s; a ninth level, paused for
// 30s, takes the place of a level whose pause ends first (here level
// 0): level 0's route is sent again, level 1's is
// refused until its own end, 10s, though other levels' pauses run on, and
// is sent at that instant; the ninth level's route is refused until 30s.
func TestQuotaAPFLevelsEachEndAtTheirOwnEndAndTheFirstToEndMakesRoom(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClockAt(ruleDate)
	th := &Throttle{draws: func() float64 { return 1 }}
	route := func(i int) string { return "/apis/g" + itoa(int64(i)) + "/v1/x" }
	pauses := []string{"10", "10", "20", "21", "22", "23", "24", "25", "30"}
	for i, ra := range pauses {
		if _, err := ask(th, fc, "GET", route(i), http.StatusTooManyRequests, apfAnswer("level-"+itoa(int64(i)), ra)); err != nil {
			t.Fatalf("level %d's first request: %v", i, err)
		}
	}
	check := func(when string, i int, refused bool, reset time.Time) {
		t.Helper()
		at, err := ask(th, fc, "GET", route(i), 0, nil)
		if errors.Is(err, ErrQuotaExhausted) != refused || (refused && !at.Equal(reset)) {
			t.Errorf("%s, level %d's route: %v, reset %v; want refused %v (until %v)", when, i, err, at, refused, reset)
		}
	}
	check("at once", 0, false, time.Time{})
	check("at once", 1, true, ruleDate.Add(10*time.Second))
	check("at once", 7, true, ruleDate.Add(25*time.Second))
	check("at once", 8, true, ruleDate.Add(30*time.Second))
	fc.Advance(10*time.Second - time.Nanosecond)
	check("a nanosecond before level 1's end", 1, true, ruleDate.Add(10*time.Second))
	fc.Advance(time.Nanosecond)
	check("at level 1's end", 1, false, time.Time{})
	check("at level 1's end", 2, true, ruleDate.Add(20*time.Second))
}

// TestQuotaAPFShorterRetryAfterOfAPausedLevelKeepsItsLongerPause: the
// priority level "workload-low" is paused for 10s by a 429; a second 429
// of the level, 2s later, asks for 3s only (a retry that went before the
// pause): a pause only moves on, and the deployments' route is refused
// until the first pause's end, 10s.
func TestQuotaAPFShorterRetryAfterOfAPausedLevelKeepsItsLongerPause(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClockAt(ruleDate)
	th := &Throttle{draws: func() float64 { return 1 }}
	const deployments = "/apis/apps/v1/deployments"
	ask(th, fc, "GET", deployments, http.StatusTooManyRequests, apfAnswer("workload-low", "10"))
	fc.Advance(2 * time.Second)
	req := httptest.NewRequest("GET", "https://api.test"+deployments, nil)
	th.record(th.Dest(req), &http.Response{StatusCode: http.StatusTooManyRequests, Header: apfAnswer("workload-low", "3"), Request: req}, nil, fc.Now(), fc)
	fc.Advance(4 * time.Second)
	if reset, err := ask(th, fc, "GET", deployments, 0, nil); !errors.Is(err, ErrQuotaExhausted) || !reset.Equal(ruleDate.Add(10*time.Second)) {
		t.Errorf("6s in, after a 429 asking for 3s at 2s: %v, reset %v; want ErrQuotaExhausted until %v", err, reset, ruleDate.Add(10*time.Second))
	}
}

// TestQuotaAPFRoutesOfAPausedLevelAreKeptWhileOtherRoutesComeAndGo: the
// deployments' route is in "workload-low", paused for a minute; then 64
// other routes (more than a destination remembers) are answered by a
// level not paused: the paused level's route is not forgotten to make
// room for them, and the deployments are refused until the pause ends.
func TestQuotaAPFRoutesOfAPausedLevelAreKeptWhileOtherRoutesComeAndGo(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClockAt(ruleDate)
	th := &Throttle{draws: func() float64 { return 1 }}
	const deployments = "/apis/apps/v1/deployments"
	ask(th, fc, "GET", deployments, http.StatusTooManyRequests, apfAnswer("workload-low", "60"))
	for i := range quotaRoutes {
		if _, err := ask(th, fc, "GET", "/apis/g"+itoa(int64(i))+"/v1/x", http.StatusOK, apfAnswer("global-default", "")); err != nil {
			t.Fatalf("route %d of a level not paused: %v; want sent", i, err)
		}
	}
	if reset, err := ask(th, fc, "GET", deployments, 0, nil); !errors.Is(err, ErrQuotaExhausted) || !reset.Equal(ruleDate.Add(time.Minute)) {
		t.Errorf("deployments after %d other routes: %v, reset %v; want ErrQuotaExhausted until %v", quotaRoutes, err, reset, ruleDate.Add(time.Minute))
	}
}

// TestQuotaRouteOfASpentPolicyIsRefusedWhileAnotherPolicyHasRequestsLeft:
// a server meters two routes by two RateLimit policies, each announced
// alone by its route's answers: "burst" spent for 30s on /a, "daily"
// with 100 left on /b. A request on /a, the route known to draw from the
// spent policy, is refused until its reset; one on /b is sent.
func TestQuotaRouteOfASpentPolicyIsRefusedWhileAnotherPolicyHasRequestsLeft(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClockAt(ruleDate)
	th := &Throttle{draws: func() float64 { return 1 }}
	ask(th, fc, "GET", "/b", http.StatusOK, http.Header{"Ratelimit": {`"daily";r=100;t=3600`}})
	ask(th, fc, "GET", "/a", http.StatusOK, http.Header{"Ratelimit": {`"burst";r=0;t=30`}})
	if reset, err := ask(th, fc, "GET", "/a", 0, nil); !errors.Is(err, ErrQuotaExhausted) || !reset.Equal(ruleDate.Add(30*time.Second)) {
		t.Errorf("GET /a with burst spent: %v, reset %v; want ErrQuotaExhausted until %v", err, reset, ruleDate.Add(30*time.Second))
	}
	if _, err := ask(th, fc, "GET", "/b", 0, nil); err != nil {
		t.Errorf("GET /b with daily's 100 left: %v; want sent", err)
	}
}
