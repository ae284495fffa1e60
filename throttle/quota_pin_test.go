package throttle

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// callHost sends one request to host through th at fc's time, with auth
// as its Authorization header when set, and records answer (with h) when
// it is admitted; it returns Admit's error.
func callHost(th *Throttle, fc *clockwork.FakeClock, host, auth string, answer int, h http.Header) error {
	req := httptest.NewRequest(http.MethodGet, "https://"+host+"/x", nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	d := th.Dest(req)
	_, _, err := th.Admit(d, req, fc)
	if err == nil {
		if h == nil {
			h = http.Header{}
		}
		th.record(d, &http.Response{StatusCode: answer, Header: h, Request: req}, nil, fc.Now(), fc)
	}
	return err
}

// TestQuotaSpentIsNeverTheDestinationEvicted: a destination whose quota
// is spent for a minute (X-RateLimit-Remaining 0), or which a 429 paused
// for a minute (Retry-After 60), then 3,000 other hosts called once each
// through a table of the default 1,024, about three turns of its hand:
// the spent destination is still refused, not sent to again as a
// destination evicted and started afresh would be. After the reset it is admitted, no longer
// pinned, and evicted in its turn like any other.
func TestQuotaSpentIsNeverTheDestinationEvicted(t *testing.T) {
	t.Parallel()
	spent := map[string]func(now time.Time) (int, http.Header){
		"remaining 0": func(now time.Time) (int, http.Header) {
			return http.StatusOK, http.Header{"X-Ratelimit-Limit": {"100"}, "X-Ratelimit-Remaining": {"0"},
				"X-Ratelimit-Reset": {itoa(now.Add(time.Minute).Unix())}}
		},
		"a 429 with Retry-After": func(time.Time) (int, http.Header) {
			return http.StatusTooManyRequests, http.Header{"Retry-After": {"60"}}
		},
	}
	for name, answer := range spent {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fc := clockwork.NewFakeClockAt(time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC))
			th := &Throttle{}
			status, h := answer(fc.Now())
			if err := callHost(th, fc, "spent.test", "", status, h); err != nil {
				t.Fatalf("first request: %v", err)
			}
			for i := range 3000 {
				if err := callHost(th, fc, fmt.Sprintf("h%d.test", i), "", http.StatusOK, nil); err != nil {
					t.Fatalf("host %d: %v; want admitted", i, err)
				}
			}
			if err := callHost(th, fc, "spent.test", "", http.StatusOK, nil); !errors.Is(err, ErrQuotaExhausted) {
				t.Fatalf("after 3000 other hosts: %v; want ErrQuotaExhausted", err)
			}
			if n := th.dests.Len(); n != DefaultMaxKeys {
				t.Errorf("%d destinations held; want %d", n, DefaultMaxKeys)
			}
			fc.Advance(time.Minute + 2*time.Second)
			if err := callHost(th, fc, "spent.test", "", http.StatusOK, nil); err != nil {
				t.Fatalf("after the reset: %v; want admitted", err)
			}
			for i := range 2 * DefaultMaxKeys {
				callHost(th, fc, fmt.Sprintf("after%d.test", i), "", http.StatusOK, nil)
			}
			if th.dests.Find("spent.test") != nil {
				t.Errorf("after the reset and %d other hosts: spent.test is still held; want evicted in its turn", 2*DefaultMaxKeys)
			}
		})
	}
}

// TestQuotaSpentOfACredentialIsNeverTheCredentialEvicted: one
// credential's quota spent at a host, then 200 other credentials calling
// it (a destination keeps MaxCredentials, 64): the spent credential is
// still refused until its reset, and the others are admitted.
func TestQuotaSpentOfACredentialIsNeverTheCredentialEvicted(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClockAt(time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC))
	th := &Throttle{}
	h := http.Header{"X-Ratelimit-Limit": {"5000"}, "X-Ratelimit-Remaining": {"0"},
		"X-Ratelimit-Reset": {itoa(fc.Now().Add(time.Hour).Unix())}}
	if err := callHost(th, fc, "api.test", "Bearer alice", http.StatusOK, h); err != nil {
		t.Fatalf("alice's first request: %v", err)
	}
	for i := range 200 {
		left := http.Header{"X-Ratelimit-Limit": {"5000"}, "X-Ratelimit-Remaining": {"4999"},
			"X-Ratelimit-Reset": {itoa(fc.Now().Add(time.Hour).Unix())}}
		if err := callHost(th, fc, "api.test", fmt.Sprint("Bearer token", i), http.StatusOK, left); err != nil {
			t.Fatalf("credential %d: %v; want admitted", i, err)
		}
	}
	if err := callHost(th, fc, "api.test", "Bearer alice", http.StatusOK, nil); !errors.Is(err, ErrQuotaExhausted) {
		t.Errorf("alice after 200 other credentials: %v; want ErrQuotaExhausted", err)
	}
}

// TestQuotaSpentOfACredentialKeepsItsDestination: alice's quota at
// api.test spent for an hour, then 3,000 other hosts called once each
// through a table of the default 1,024: api.test, which holds alice's
// quota, is not forgotten, and alice is still refused; once alice's
// quota has reset and she is admitted again, api.test is evicted in its
// turn like any other host.
func TestQuotaSpentOfACredentialKeepsItsDestination(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClockAt(time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC))
	th := &Throttle{}
	h := http.Header{"X-Ratelimit-Limit": {"5000"}, "X-Ratelimit-Remaining": {"0"},
		"X-Ratelimit-Reset": {itoa(fc.Now().Add(time.Hour).Unix())}}
	if err := callHost(th, fc, "api.test", "Bearer alice", http.StatusOK, h); err != nil {
		t.Fatalf("alice's first request: %v", err)
	}
	for i := range 3000 {
		callHost(th, fc, fmt.Sprintf("h%d.test", i), "", http.StatusOK, nil)
	}
	if err := callHost(th, fc, "api.test", "Bearer alice", http.StatusOK, nil); !errors.Is(err, ErrQuotaExhausted) {
		t.Fatalf("alice after 3000 other hosts: %v; want ErrQuotaExhausted", err)
	}
	fc.Advance(time.Hour + 2*time.Second)
	if err := callHost(th, fc, "api.test", "Bearer alice", http.StatusOK, nil); err != nil {
		t.Fatalf("alice after the reset: %v; want admitted", err)
	}
	for i := range 2 * DefaultMaxKeys {
		callHost(th, fc, fmt.Sprintf("after%d.test", i), "", http.StatusOK, nil)
	}
	if th.dests.Find("api.test") != nil {
		t.Errorf("after the reset and %d other hosts: api.test is still held; want evicted in its turn", 2*DefaultMaxKeys)
	}
}
