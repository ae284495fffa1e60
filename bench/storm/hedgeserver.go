package main

import (
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"time"
)

// opHeader carries the index of the operation a request belongs to. Every
// hedging library under test sends the caller's headers with every
// attempt, so the server can tell an operation's first attempt from its
// hedges and give each the same latency under every policy.
const opHeader = "X-Hedge-Op"

// latencyProfile returns the service time of a request arriving at
// elapsed since the server started, given u, a uniform draw in [0, 1)
// fixed by the run's random stream, the operation and the attempt's
// order of arrival;
// queued is true when the request must first take one of the server's
// bounded slots.
type latencyProfile func(elapsed time.Duration, u float64) (service time.Duration, queued bool)

// independentProfile answers in base, except a fraction slowFrac of
// requests, chosen independently, that take slow.
func independentProfile(base, slow time.Duration, slowFrac float64) latencyProfile {
	return func(_ time.Duration, u float64) (time.Duration, bool) {
		if u < slowFrac {
			return slow, false
		}
		return base, false
	}
}

// shiftProfile is independent slowness whose base latency moves from
// before to after at the given time.
func shiftProfile(at, before, after, slow time.Duration, slowFrac float64) latencyProfile {
	early := independentProfile(before, slow, slowFrac)
	late := independentProfile(after, slow, slowFrac)
	return func(elapsed time.Duration, u float64) (time.Duration, bool) {
		if elapsed < at {
			return early(elapsed, u)
		}
		return late(elapsed, u)
	}
}

// correlatedProfile is healthy (base) until slowFrom, then answers every
// request in slow until busyFrom, then serves each request for an
// exponentially distributed time of mean busyMean in one of the server's
// bounded slots: near saturation, every extra request queues behind the
// others and lengthens every wait.
func correlatedProfile(base, slow time.Duration, slowFrom, busyFrom, busyMean time.Duration) latencyProfile {
	return func(elapsed time.Duration, u float64) (time.Duration, bool) {
		switch {
		case elapsed < slowFrom:
			return base, false
		case elapsed < busyFrom:
			return slow, false
		}
		return time.Duration(-math.Log1p(-u) * float64(busyMean)), true
	}
}

// hedgeServer is a loopback HTTP/1.1 server whose latency follows a
// profile. It counts every request, the requests whose callers gave up
// before the answer (canceled hedges and losers), and the connections
// it accepted.
type hedgeServer struct {
	ts      *httptest.Server
	start   time.Time
	seed    uint64
	profile latencyProfile
	slots   chan struct{} // bounded concurrency of queued requests

	seen     []atomic.Int32 // requests so far, by operation
	hits     atomic.Int64
	canceled atomic.Int64
	conns    atomic.Int64
}

// newHedgeServer starts a server for ops operations on 127.0.0.1 with at
// most slots queued requests served at once.
func newHedgeServer(p latencyProfile, seed uint64, ops, slots int) *hedgeServer {
	s := &hedgeServer{profile: p, seed: seed, slots: make(chan struct{}, max(slots, 1)), seen: make([]atomic.Int32, ops)}
	s.ts = httptest.NewUnstartedServer(s)
	s.ts.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.ts.Start()
	s.start = time.Now()
	return s
}

func (s *hedgeServer) url() string { return s.ts.URL }

func (s *hedgeServer) close() { s.ts.Close() }

// draw returns the uniform draw of the n-th request of operation op: the
// same for every policy, so that a policy's first attempts meet exactly
// the latencies a single attempt meets.
func (s *hedgeServer) draw(op, n int) float64 {
	x := s.seed ^ uint64(op)*0x9e3779b97f4a7c15 ^ uint64(n+1)*0xbf58476d1ce4e5b9
	// splitmix64's finaliser.
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / (1 << 53)
}

func (s *hedgeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.hits.Add(1)
	op, err := strconv.Atoi(r.Header.Get(opHeader))
	if err != nil || op < 0 || op >= len(s.seen) {
		http.Error(w, "no operation", http.StatusBadRequest)
		return
	}
	n := int(s.seen[op].Add(1)) - 1
	service, queued := s.profile(time.Since(s.start), s.draw(op, n))
	ctx := r.Context()
	if queued {
		select {
		case s.slots <- struct{}{}:
			defer func() { <-s.slots }()
		case <-ctx.Done():
			s.canceled.Add(1)
			return
		}
	}
	t := time.NewTimer(service)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		s.canceled.Add(1)
		return
	}
	w.Header().Set("Content-Length", "2")
	w.Write([]byte("ok"))
}
