package httpretry

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/httpretry/httpretry/internal/desttable"
	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// This file holds attempts to break the Throttle: fields a caller may set
// to any float or duration, and destinations named in more than one way.

// TestThrottleTinyWindowDoesNotPanicARoundTrip: the same through a
// Transport: a 503 and a later operation with Window 5ns return, they do
// not panic.
func TestThrottleTinyWindowDoesNotPanicARoundTrip(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := &countingBase{status: func(*http.Request) int { return 503 }}
	tr := &Transport{Base: base, Clock: fc, MaxAttempts: 1, Throttle: &throttle.Throttle{Window: 5}}
	for i := range 3 {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("operation %d with Window 5ns: panic %v; want a response or an error", i+1, p)
				}
			}()
			resp, err := tr.RoundTrip(httptest.NewRequest("GET", "http://api.test/", nil))
			if err == nil {
				resp.Body.Close()
			}
		}()
		fc.Advance(time.Millisecond)
	}
}

// TestThrottleOneStateForOneHost: a host is one destination however its
// URL writes it: host names compare case-insensitively (DNS), and a
// scheme's default port is the same as none. Each spelling shares the
// throttle's state and the per-host budget, so a failing host cannot be
// reached around its throttle by changing the case.
func TestThrottleOneStateForOneHost(t *testing.T) {
	t.Parallel()
	for _, pair := range [][2]string{
		{"http://api.test/", "http://API.TEST/"},
		{"http://api.test/", "http://Api.Test/"},
		{"http://[2001:db8::1]:8080/", "http://[2001:DB8::1]:8080/"},
		{"http://api.test/", "http://api.test:80/"},
		{"https://api.test/", "https://api.test:443/"},
	} {
		a, b := httptest.NewRequest("GET", pair[0], nil), httptest.NewRequest("GET", pair[1], nil)
		th := &throttle.Throttle{}
		if th.Dest(a) != th.Dest(b) {
			t.Errorf("throttle: %s and %s are two destinations (keys %q, %q); want one", pair[0], pair[1], desttable.HostKey(a), desttable.HostKey(b))
		}
		tr := &Transport{BudgetPerHost: true}
		if tr.budgetFor(a) != tr.budgetFor(b) {
			t.Errorf("BudgetPerHost: %s and %s have two budgets; want one", pair[0], pair[1])
		}
	}
}
