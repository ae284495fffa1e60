package throttle

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// resourceCall is one request and, when status is not 0, the answer it
// got, with its rate-limit fields.
type resourceCall struct {
	method, path string
	status       int
	h            http.Header
}

// callResources sends each call through th at clock's time, recording
// the answer of those that have one, and returns the error Admit gave
// each.
func callResources(th *Throttle, clock Clock, calls []resourceCall) []error {
	errs := make([]error, len(calls))
	for i, c := range calls {
		req := httptest.NewRequest(c.method, "https://api.test"+c.path, nil)
		d := th.Dest(req)
		_, _, errs[i] = th.Admit(d, req, clock)
		if c.status != 0 && errs[i] == nil {
			th.Record(d, &Result{Status: c.status, Header: c.h, Request: req, Sent: clock.Now(),
				Overload: c.status == http.StatusTooManyRequests}, clock)

		}
	}
	return errs
}

// TestQuotaSpentNamedResourceRefusesOnlyItsRoutes: GitHub names the
// quota each answer counted against (X-RateLimit-Resource), Discord the
// bucket (X-RateLimit-Bucket). When the first quota a process learns of
// is a spent one (GraphQL's points, the one-minute search quota, one
// channel's bucket), a request on a route not known to draw from it
// (REST's core, another resource) may draw from a quota not yet
// announced: it is sent, not refused until the spent quota's reset (50
// minutes for GraphQL). Requests on the spent quota's routes are refused,
// and so is a route that answered with the spent quota, once it has. A
// RateLimit policy's name says no such thing (a server names its only
// policy "default"): every route is refused while it is spent.
func TestQuotaSpentNamedResourceRefusesOnlyItsRoutes(t *testing.T) {
	t.Parallel()
	date := time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC)
	github := func(resource, remaining string, reset time.Duration) http.Header {
		return http.Header{"Date": {date.Format(http.TimeFormat)}, "X-Ratelimit-Limit": {"5000"},
			"X-Ratelimit-Remaining": {remaining}, "X-Ratelimit-Reset": {itoa(date.Add(reset).Unix())},
			"X-Ratelimit-Resource": {resource}}
	}
	discord := func(bucket string) http.Header {
		return http.Header{"X-Ratelimit-Limit": {"5"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset-After": {"3.250"},
			"X-Ratelimit-Bucket": {bucket}}
	}
	type check struct {
		method, path string
		refused      bool
	}
	tests := []struct {
		name   string
		first  []resourceCall
		checks []check
	}{
		{"GitHub: GraphQL's points spent, REST's core not heard of", []resourceCall{
			{"POST", "/graphql", http.StatusOK, github("graphql", "0", 50*time.Minute)},
		}, []check{{"POST", "/graphql", true}, {"GET", "/repos/a/b", false}, {"GET", "/user", false}}},
		{"GitHub: search spent, core not heard of", []resourceCall{
			{"GET", "/search/code", http.StatusForbidden, github("search", "0", 40*time.Second)},
		}, []check{{"GET", "/search/code", true}, {"GET", "/search/issues", true}, {"GET", "/repos/a/b", false}}},
		{"GitHub: core spent, then a new route meets it", []resourceCall{
			{"GET", "/repos/a/b", http.StatusOK, github("core", "0", 50*time.Minute)},
			{"GET", "/users/x", http.StatusForbidden, github("core", "0", 50*time.Minute)},
		}, []check{{"GET", "/repos/c/d", true}, {"GET", "/users/y", true}, {"GET", "/search/code", false}}},
		{"a RateLimit policy's name, which a server gives its only quota", []resourceCall{
			{"GET", "/x", http.StatusOK, http.Header{"Ratelimit": {`"default";r=0;t=30`}}},
		}, []check{{"GET", "/x", true}, {"PUT", "/y", true}}},
		{"Discord: one bucket spent", []resourceCall{
			{"POST", "/channels/111/messages", http.StatusOK, discord("abcd1234")},
		}, []check{{"POST", "/channels/111/messages", true}, {"GET", "/guilds/9/members", false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := clockwork.NewFakeClockAt(date)
			th := &Throttle{draws: func() float64 { return 1 }}
			for i, err := range callResources(th, clock, tt.first) {
				if err != nil {
					t.Fatalf("call %d (%s %s): %v; want sent", i, tt.first[i].method, tt.first[i].path, err)
				}
			}
			for _, c := range tt.checks {
				errs := callResources(th, clock, []resourceCall{{method: c.method, path: c.path}})
				if got := errors.Is(errs[0], ErrQuotaExhausted); got != c.refused {
					t.Errorf("%s %s: %v; want refused %v", c.method, c.path, errs[0], c.refused)
				}
			}
		})
	}
}
