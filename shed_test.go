package httpretry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

func TestShedderAdmits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                        string
		inflight, limit, retryLimit int64
		retry, want                 bool
	}{
		{"no limit", 1000, 0, 0, true, true},
		{"first attempt below the limit", 9, 10, 9, false, true},
		{"first attempt at the limit", 10, 10, 9, false, false},
		{"retry below the retry limit", 8, 10, 9, true, true},
		{"retry at the retry limit, first attempts still admitted", 9, 10, 9, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := admits(tt.inflight, tt.limit, tt.retryLimit, tt.retry); got != tt.want {
				t.Errorf("admits(%d, %d, %d, retry %v) = %v; want %v", tt.inflight, tt.limit, tt.retryLimit, tt.retry, got, tt.want)
			}
		})
	}
}

func TestShedderRetryLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		limit, retryLimit int
		want              int64
	}{
		{100, 0, 90},
		{10, 0, 9},
		{5, 0, 4},
		{2, 0, 1},
		{1, 0, 1},
		{100, 50, 50},
		{100, 200, 100},
	}
	for _, tt := range tests {
		s := &Shedder{Limit: tt.limit, RetryLimit: tt.retryLimit}
		if got := s.retryLimit(); got != tt.want {
			t.Errorf("Limit %d RetryLimit %d: retries refused at %d in flight; want %d", tt.limit, tt.retryLimit, got, tt.want)
		}
	}
}

func TestIsRetry(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]bool{"": false, "1": false, "2": true, "17": true, "x": false, "-3": false} {
		h := http.Header{}
		if v != "" {
			h.Set(AttemptHeader, v)
		}
		if got := isRetry(h); got != want {
			t.Errorf("isRetry(Retry-Attempt %q) = %v; want %v", v, got, want)
		}
	}
}

// TestShedderRefusesRetriesBeforeFirstAttempts: a server limited to 10
// requests at once (retries to 9) with 9 in flight, over loopback. A
// retry (Retry-Attempt: 2) is refused with 503 and "X-Should-Retry:
// false", never reaching the handler; a first attempt still takes the
// tenth place; once 10 are in flight a first attempt is refused too.
// Shed counts one of each.
func TestShedderRefusesRetriesBeforeFirstAttempts(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var served atomic.Int64
	s := &Shedder{Limit: 10, Next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		<-release
	})}
	srv := httptest.NewServer(s)
	defer srv.Close()
	send := func(attempt int) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		if attempt > 0 {
			req.Header.Set(AttemptHeader, strconv.Itoa(attempt))
		}
		resp, err := srv.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return resp, err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(release)
	for range 9 {
		wg.Go(func() { send(1) })
	}
	pollUntil(t, "9 requests in flight", func() bool { return served.Load() >= 9 })
	resp, err := send(2)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != shedStatus || resp.Header.Get("X-Should-Retry") != "false" || resp.Header.Get("Retry-After") != "" {
		t.Errorf("retry with 9 in flight: %d, X-Should-Retry %q, Retry-After %q; want 503, false, none",
			resp.StatusCode, resp.Header.Get("X-Should-Retry"), resp.Header.Get("Retry-After"))
	}
	wg.Go(func() { send(1) })
	pollUntil(t, "10 requests in flight", func() bool { return served.Load() >= 10 })
	if resp, err := send(0); err != nil || resp.StatusCode != shedStatus {
		t.Errorf("first attempt with 10 in flight: %v, %v; want 503", resp, err)
	}
	if first, retries := s.Shed(); first != 1 || retries != 1 {
		t.Errorf("Shed() = %d first attempts, %d retries; want 1, 1", first, retries)
	}
	if n := served.Load(); n != 10 {
		t.Errorf("the handler served %d; want 10", n)
	}
}

// TestShedderAnswerEndsATransportsOperation: a Transport with Propagate
// and 3 attempts, against a Shedder with no place left: its first attempt
// is refused with "X-Should-Retry: false", and the operation ends there
// with the 503 (Reason final), one request sent.
func TestShedderAnswerEndsATransportsOperation(t *testing.T) {
	t.Parallel()
	var seen atomic.Int64
	s := &Shedder{Limit: 1, Next: http.NotFoundHandler()}
	s.inflight.Store(1) // the one place is taken
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		s.ServeHTTP(w, r)
	}))
	defer srv.Close()
	client := &http.Client{Transport: &Transport{Base: srv.Client().Transport, Propagate: true}}
	var o Outcome
	req, _ := http.NewRequestWithContext(WithOutcome(context.Background(), &o), http.MethodGet, srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != shedStatus || o.Attempts != 1 || o.Reason != Final || seen.Load() != 1 {
		t.Errorf("status %d, %d attempts, reason %s, %d sent; want 503, 1, final, 1", resp.StatusCode, o.Attempts, o.Reason, seen.Load())
	}
}

// BenchmarkShedderRefusal is the server's time to refuse one request.
func BenchmarkShedderRefusal(b *testing.B) {
	s := &Shedder{Limit: 1, Next: http.NotFoundHandler()}
	s.inflight.Store(1)
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set(AttemptHeader, "2")
	for b.Loop() {
		s.ServeHTTP(httptest.NewRecorder(), req)
	}
}

// TestShedderServesARetryWhenNothingIsInFlight: the retries' reserve is
// kept for first attempts only while some are in flight: at a Limit of
// one or two, a retry to a server serving nothing (its first attempt met
// a reset connection, not load) is served, not refused with a 503 that
// tells its client not to try again.
func TestShedderServesARetryWhenNothingIsInFlight(t *testing.T) {
	t.Parallel()
	for _, limit := range []int{1, 2, 3, 10} {
		served := 0
		s := &Shedder{Limit: limit, Next: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ })}
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set(AttemptHeader, "2")
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || served != 1 {
			t.Errorf("Limit %d, nothing in flight: a retry got %d, served %d times; want 200, served once", limit, rec.Code, served)
		}
		if first, retries := s.Shed(); first != 0 || retries != 0 {
			t.Errorf("Limit %d: shed %d first attempts, %d retries; want none", limit, first, retries)
		}
	}
}

// TestShedderCountsARequestInFlightOnlyUntilItIsServed: a request served
// leaves the count of requests in flight: with Limit 1, requests one
// after another are all served, however many, and none is shed.
func TestShedderCountsARequestInFlightOnlyUntilItIsServed(t *testing.T) {
	t.Parallel()
	served := 0
	s := &Shedder{Limit: 1, Next: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ })}
	for i := range 5 {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("request %d, one after another under Limit 1: status %d; want 200", i+1, rec.Code)
		}
	}
	if first, retries := s.Shed(); served != 5 || first != 0 || retries != 0 {
		t.Errorf("served %d, shed %d first attempts and %d retries; want 5 served, none shed", served, first, retries)
	}
}
