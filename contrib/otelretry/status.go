package otelretry

import (
	"sync"
	"sync/atomic"
)

// MaxStatusCodes is how many distinct values of http.response.status_code
// one Metrics puts on its duration histograms. A status code seen after
// that many others, a code outside 100–599, and an attempt or operation
// without a response carry none; their class stays in
// httpretry.attempt.result and error.type.
const MaxStatusCodes = 32

// statusTable gives each status code a slot, the index of its series in
// a route's tables, the first time it is seen, up to MaxStatusCodes
// slots. Looking a code up once it has one is an atomic load.
type statusTable struct {
	mu sync.Mutex // held while assigning a slot
	n  int32      // slots assigned
	// slots holds, by status code, its slot plus one: 0 while unseen,
	// -1 when it came past the cap.
	slots [600]atomic.Int32
}

// slot returns the slot of code, and false when code carries no
// attribute: outside 100–599, or past the cap.
func (s *statusTable) slot(code int) (int, bool) {
	if code < 100 || code > 599 {
		return 0, false
	}
	v := s.slots[code].Load()
	if v == 0 {
		v = s.assign(code)
	}
	return int(v - 1), v > 0
}

func (s *statusTable) assign(code int) int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := s.slots[code].Load(); v != 0 {
		return v
	}
	v := int32(-1)
	if s.n < MaxStatusCodes {
		s.n++
		v = s.n
	}
	s.slots[code].Store(v)
	return v
}
