package main

import (
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// phaseHeader carries the index of the phase in which an operation
// arrived. Every retry library under test resends the caller's headers on
// every attempt, so the server can charge each hit to the operation's
// phase, even when a retry lands in the next one.
const phaseHeader = "X-Storm-Phase"

// bucket is the width of every timeline bucket.
const bucket = 100 * time.Millisecond

// mode is what the server model does with a request.
type mode int

const (
	healthy   mode = iota // serve up to the full capacity
	outage                // answer every request 503 at once
	brownout              // serve up to a fraction of the capacity
	contended             // accept the first request of every window, 503 to the rest
	paced                 // serve at most a rate of requests a second
	dead                  // close every connection unanswered: a backend that died, behind a proxy
	flaky                 // healthy, but answer a random share of requests 503 at once
)

func (m mode) String() string {
	switch m {
	case outage:
		return "outage"
	case brownout:
		return "brownout"
	case contended:
		return "contention"
	case paced:
		return "paced"
	case dead:
		return "dead"
	case flaky:
		return "flaky"
	}
	return "healthy"
}

// phase is one stretch of a scenario's schedule.
type phase struct {
	name     string
	dur      time.Duration
	mode     mode
	capacity float64       // fraction of the server's capacity in a brownout
	window   time.Duration // of a contended phase
	rate     float64       // requests a second a paced phase serves
	fail     float64       // share of requests a flaky phase answers 503
}

// server models a dependency on loopback: it serves at most capacity
// requests at once, each for service time, and sheds every request beyond
// that at once with a 503, as a load-shedding server does. Sheds and
// outage answers are hits too: they reach the server and cost it a
// connection slot, a parse and a write.
//
// Its schedule, a list of phases, starts when the server starts; the
// server derives its mode from the clock, so no goroutine switches it.
type server struct {
	ts       *httptest.Server
	start    time.Time
	phases   []phase
	capacity int
	service  time.Duration

	inflight atomic.Int64
	lastSlot atomic.Int64 // the last window of a contended phase that accepted a request
	pace     pacer        // the token bucket of paced phases
	hits     atomic.Int64 // every request, whatever its answer
	served   atomic.Int64 // 200s
	shed     atomic.Int64 // 503s for lack of capacity
	down     atomic.Int64 // 503s of an outage
	conns    atomic.Int64 // connections accepted (StateNew)

	byPhase []atomic.Int64 // hits by the phase the operation arrived in; the last slot holds untagged hits
	hitsAt  []atomic.Int64 // hits by 100ms bucket since start
	connsAt []atomic.Int64 // new connections by 100ms bucket
}

// newServer starts a server with the given schedule on 127.0.0.1; its
// timeline holds horizon worth of buckets (later events count in the last
// one). Close it with close.
func newServer(phases []phase, capacity int, service, horizon time.Duration) *server {
	n := int(horizon/bucket) + 1
	s := &server{
		phases:   phases,
		capacity: capacity,
		service:  service,
		byPhase:  make([]atomic.Int64, len(phases)+1),
		hitsAt:   make([]atomic.Int64, n),
		connsAt:  make([]atomic.Int64, n),
	}
	// httptest listens on 127.0.0.1 only, never on every interface.
	s.ts = httptest.NewUnstartedServer(s)
	s.ts.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
			s.connsAt[s.index(time.Now())].Add(1)
		}
	}
	s.lastSlot.Store(-1)
	s.start = time.Now()
	s.ts.Start()
	return s
}

// url returns the server's base URL.
func (s *server) url() string { return s.ts.URL }

// close closes every connection and waits for the handlers to return.
func (s *server) close() { s.ts.Close() }

// index returns the timeline bucket of t.
func (s *server) index(t time.Time) int {
	i := int(t.Sub(s.start) / bucket)
	return min(max(i, 0), len(s.hitsAt)-1)
}

// phaseAt returns the phase in force at t, the last one once the schedule
// has run out, and the time since the start of the schedule.
func (s *server) phaseAt(t time.Time) (phase, time.Duration) {
	el := t.Sub(s.start)
	rest := el
	for _, q := range s.phases {
		if rest < q.dur {
			return q, el
		}
		rest -= q.dur
	}
	return s.phases[len(s.phases)-1], el
}

// admit reports whether a request that arrived el into phase p may be
// served, taking a capacity slot if it needs one, and counts a refusal by
// its cause.
func (s *server) admit(p phase, el time.Duration) bool {
	switch p.mode {
	case outage, dead:
		s.down.Add(1)
		return false
	case flaky:
		if rand.Float64() < p.fail {
			s.down.Add(1)
			return false
		}
	case contended:
		// The first request of each window wins it; a window's index
		// only grows, so a request that finds its window (or a later
		// one) taken has lost.
		slot := int64(el / p.window)
		for {
			last := s.lastSlot.Load()
			if last >= slot {
				s.shed.Add(1)
				return false
			}
			if s.lastSlot.CompareAndSwap(last, slot) {
				return true
			}
		}
	case paced:
		if !s.pace.take(p.rate, time.Now()) {
			s.shed.Add(1)
			return false
		}
		s.inflight.Add(1) // released when served, as any other
		return true
	}
	capacity := s.capacity
	if p.mode == brownout {
		capacity = max(1, int(float64(capacity)*p.capacity+0.5))
	}
	if s.inflight.Add(1) > int64(capacity) {
		s.inflight.Add(-1)
		s.shed.Add(1)
		return false
	}
	return true
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	s.hits.Add(1)
	s.hitsAt[s.index(now)].Add(1)
	tag := len(s.phases)
	if p, err := strconv.Atoi(r.Header.Get(phaseHeader)); err == nil && p >= 0 && p < len(s.phases) {
		tag = p
	}
	s.byPhase[tag].Add(1)

	p, el := s.phaseAt(now)
	if !s.admit(p, el) {
		if p.mode == dead {
			closeUnanswered(w)
			return
		}
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	if p.mode == contended {
		// What is contended is the window, not a worker's time.
		s.served.Add(1)
		w.Write([]byte("ok\n"))
		return
	}
	defer s.inflight.Add(-1)
	t := time.NewTimer(s.service)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
		// The client gave up; the slot was held until now, as a real
		// server's would be.
		return
	}
	s.served.Add(1)
	w.Write([]byte("ok\n"))
}

// closeUnanswered closes the request's connection without an answer, as a
// backend that died does: a proxy in front answers 502.
func closeUnanswered(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err) // HTTP/1.1 over httptest: cannot happen
	}
	conn.Close()
}

// pacedBurst is how long a paced server's token bucket can save up for:
// its burst is this much of its rate, so that a Poisson arrival stream
// at twice the rate is served at the rate, not below it.
const pacedBurst = 100 * time.Millisecond

// pacer is a token bucket: rate tokens a second, up to rate·pacedBurst
// saved. Its zero value is full at its first use.
type pacer struct {
	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// take reports whether a token is there at now, and takes it.
func (b *pacer) take(rate float64, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	burst := max(1, rate*pacedBurst.Seconds())
	if b.last.IsZero() {
		b.tokens = burst
	} else {
		b.tokens = min(burst, b.tokens+rate*now.Sub(b.last).Seconds())
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// timeline copies a counter slice.
func timeline(c []atomic.Int64) []int64 {
	out := make([]int64, len(c))
	for i := range c {
		out[i] = c[i].Load()
	}
	return out
}
