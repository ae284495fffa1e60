package main

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/idempotency"
)

// phase is a stretch of the run during which the demo server fails a
// given share of requests.
type phase struct {
	name     string
	dur      time.Duration
	failRate float64 // share of requests answered 503 or left hanging
}

// flakyServer is the demo's deliberately unreliable service, in the
// manner of examples/demo's: GET /books/{id} fails a share of requests
// (503 mostly, sometimes a response too slow for the client's attempt
// timeout), and POST /orders applies an order, deduplicating by
// Idempotency-Key, then sometimes loses the response, so that the retry
// is answered from the idempotency store. The share follows the phases.
type flakyServer struct {
	phases []phase
	start  time.Time
	events func(kind string) // reports idempotency events; never nil
	hang   time.Duration     // how long a slow response takes

	mu  sync.Mutex // protects rnd
	rnd *rand.Rand

	ordersMu sync.Mutex        // protects orders
	orders   map[string][]byte // stored responses by idempotency key
	applied  atomic.Int64      // orders applied once
}

func newFlakyServer(phases []phase, start time.Time, hang time.Duration, events func(string)) *flakyServer {
	return &flakyServer{
		phases: phases, start: start, hang: hang, events: events,
		rnd:    rand.New(rand.NewPCG(1, 2)),
		orders: make(map[string][]byte),
	}
}

// failRate returns the share of failures at time now.
func (s *flakyServer) failRate(now time.Time) float64 {
	at := now.Sub(s.start)
	for _, p := range s.phases {
		if at < p.dur {
			return p.failRate
		}
		at -= p.dur
	}
	return s.phases[len(s.phases)-1].failRate
}

// roll returns a number in [0, 1).
func (s *flakyServer) roll() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rnd.Float64()
}

func (s *flakyServer) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /books/{id}", s.book)
	mux.HandleFunc("POST /orders", s.order)
	return mux
}

func (s *flakyServer) book(w http.ResponseWriter, r *http.Request) {
	rate := s.failRate(time.Now())
	switch x := s.roll(); {
	case x < rate*0.1:
		// A slow response: the client's attempt timeout cuts it.
		select {
		case <-time.After(s.hang):
		case <-r.Context().Done():
			return
		}
	case x < rate:
		// An overloaded server sheds connections too: the retry needs a
		// new one, which the attempt latency by connection shows.
		w.Header().Set("Connection", "close")
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintf(w, "{\"id\":%q}\n", r.PathValue("id"))
}

// order applies an order once per idempotency key. A repeated key is
// answered from the store (a replay); a request without a key is refused.
// A share of first executions lose their response after applying it,
// as a crashing proxy would: the client cannot tell, and retries.
func (s *flakyServer) order(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get(httpretry.IdempotencyKeyHeader)
	if key == "" {
		s.events(string(idempotency.KindMissingKey))
		http.Error(w, "Idempotency-Key required", http.StatusBadRequest)
		return
	}
	s.ordersMu.Lock()
	stored, seen := s.orders[key]
	if !seen {
		stored = fmt.Appendf(nil, "{\"order\":%d}\n", s.applied.Add(1))
		s.orders[key] = stored
	}
	s.ordersMu.Unlock()
	if seen {
		s.events(string(idempotency.KindReplayed))
		w.WriteHeader(http.StatusCreated)
		w.Write(stored)
		return
	}
	s.events(string(idempotency.KindExecuted))
	if s.roll() < s.failRate(time.Now()) {
		http.Error(w, "response lost", http.StatusBadGateway)
		return
	}
	w.WriteHeader(http.StatusCreated)
	w.Write(stored)
}
