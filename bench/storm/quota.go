package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync"
	"time"
)

// quotaConfig is the quota scenario's settings.
type quotaConfig struct {
	limit   int           // requests per window
	window  time.Duration // whole seconds: the headers count in seconds
	rate    float64       // offered, per second
	dur     time.Duration // of the load
	service time.Duration
}

// quotaHeaders is how the quota server states its quota.
type quotaHeaders int

const (
	ietfHeaders quotaHeaders = iota // RateLimit and RateLimit-Policy (draft-ietf-httpapi-ratelimit-headers)
	xHeaders                        // X-RateLimit-Limit, -Remaining and -Reset (epoch seconds)
)

func (h quotaHeaders) String() string {
	if h == xHeaders {
		return "X-RateLimit"
	}
	return "RateLimit"
}

// quotaServer grants limit requests per fixed window, aligned to the
// Unix epoch, and answers 429 beyond it. Every answer states the quota in
// headers; no 429 carries Retry-After, so only a client that reads the
// quota headers can tell when to stop.
type quotaServer struct {
	ts      *httptest.Server
	limit   int
	window  time.Duration
	service time.Duration
	headers quotaHeaders

	mu       sync.Mutex    // protects the fields below
	current  int64         // index of the current window
	used     int           // requests counted in it
	rejected map[int64]int // 429s by window
	accepted map[int64]int // 200s by window
}

func newQuotaServer(q quotaConfig, h quotaHeaders) *quotaServer {
	s := &quotaServer{limit: q.limit, window: q.window, service: q.service, headers: h,
		rejected: map[int64]int{}, accepted: map[int64]int{}}
	s.ts = httptest.NewServer(s)
	return s
}

// take counts a request at now and returns whether it is within quota,
// the requests left in its window and the window's end.
func (s *quotaServer) take(now time.Time) (ok bool, remaining int, reset time.Time) {
	w := now.UnixNano() / int64(s.window)
	s.mu.Lock()
	defer s.mu.Unlock()
	if w != s.current {
		s.current, s.used = w, 0
	}
	s.used++
	ok = s.used <= s.limit
	if ok {
		s.accepted[w]++
	} else {
		s.rejected[w]++
	}
	return ok, max(0, s.limit-s.used), time.Unix(0, (w+1)*int64(s.window))
}

// quotaFields returns the header fields that state a quota of limit per
// window with remaining left until reset, seen at now, in style h.
// Seconds are rounded up, so that a client that waits them never
// arrives before the reset.
func quotaFields(h quotaHeaders, limit int, window time.Duration, remaining int, reset, now time.Time) [][2]string {
	if h == xHeaders {
		return [][2]string{
			{"X-RateLimit-Limit", strconv.Itoa(limit)},
			{"X-RateLimit-Remaining", strconv.Itoa(remaining)},
			{"X-RateLimit-Reset", strconv.FormatInt(ceilSeconds(reset.Sub(time.Unix(0, 0))), 10)},
		}
	}
	return [][2]string{
		{"RateLimit-Policy", fmt.Sprintf(`"default";q=%d;w=%d`, limit, ceilSeconds(window))},
		{"RateLimit", fmt.Sprintf(`"default";r=%d;t=%d`, remaining, ceilSeconds(reset.Sub(now)))},
	}
}

// ceilSeconds returns d in whole seconds, rounded up.
func ceilSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

func (s *quotaServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	ok, remaining, reset := s.take(now)
	for _, f := range quotaFields(s.headers, s.limit, s.window, remaining, reset, now) {
		w.Header().Set(f[0], f[1])
	}
	if !ok {
		http.Error(w, "quota exceeded", http.StatusTooManyRequests)
		return
	}
	t := time.NewTimer(s.service)
	defer t.Stop()
	select {
	case <-t.C:
		w.Write([]byte("ok\n"))
	case <-r.Context().Done():
	}
}

// quotaRun is one policy's pass through the quota scenario.
type quotaRun struct {
	policy   policy
	headers  quotaHeaders
	ops      []top
	dur      time.Duration
	rejected []int // 429s in each complete window
	accepted []int // 200s in each complete window
}

// runQuota passes p through the quota scenario on a fresh server.
func runQuota(ctx context.Context, c tconfig, p policy, h quotaHeaders) *quotaRun {
	runtime.GC()
	q := c.quota
	phases := []phase{{name: "quota", dur: q.dur}}
	arr := arrivals(c.seed, q.rate, phases)
	srv := newQuotaServer(q, h)
	f := newFleet(p, 1)
	start := time.Now()
	ops := driveTo(ctx, start, arr, c.deadline, func(i int) dest { return dest{client: f.client(i), url: srv.ts.URL} })
	f.closeIdle()
	srv.ts.Close()
	r := &quotaRun{policy: p, headers: h, ops: ops, dur: q.dur}
	r.rejected, r.accepted = completeWindows(srv.rejected, srv.accepted, start, start.Add(q.dur), q.window)
	return r
}

// completeWindows returns the counts of the windows that lie wholly
// within [from, to), in order.
func completeWindows(rejected, accepted map[int64]int, from, to time.Time, window time.Duration) (rej, acc []int) {
	first := (from.UnixNano() + int64(window) - 1) / int64(window)
	last := to.UnixNano()/int64(window) - 1
	for w := first; w <= last; w++ {
		rej = append(rej, rejected[w])
		acc = append(acc, accepted[w])
	}
	return rej, acc
}

// worst returns the largest of v, 0 for none.
func worst(v []int) int {
	m := 0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}
