// Package alarm rings many short-lived alarms from one timer. An alarm
// is armed for a time and, most of the time, stopped before it rings:
// arming one takes a lock and a push on a heap ordered by due time, and
// stopping it one atomic operation, where a runtime timer of its own
// would cost a Reset and a Stop, each on the runtime's timer heap, and a
// clock reading. The set's one timer is armed for the earliest alarm;
// when it fires, it rings every alarm that is due and not stopped, each
// on a goroutine of its own (as [time.AfterFunc] runs its function), and
// is armed again for the next.
//
// An alarm stopped stays on the heap until it reaches the top, where the
// next Arm or ring drops it. When alarms are armed for a like delay,
// the top is the oldest, stopped already in the common case, and the
// heap holds about as many entries as alarms are armed and not yet
// stopped; one alarm left armed keeps those armed after it, stopped or
// not, until it rings (at most its delay).
package alarm

import (
	"sync"
	"sync/atomic"
	"time"
)

// Alarm is one alarm, armed by [Set.Arm], stopped by [Alarm.Stop]. It may
// be armed again once it rang or was stopped; its zero value is ready.
// Only its owner arms it, never two goroutines at once.
type Alarm struct {
	// state is the arming's generation, shifted left by two, and the
	// status of that arming in the low two bits: a ring of an entry left
	// on the heap by an earlier arming is told from the current one.
	state atomic.Uint64
	ring  func() // what a ring of the current arming runs
}

// The status of an alarm's arming, state's low two bits.
const (
	idle    = 0 // never armed
	armed   = 1 // armed: neither rung nor stopped
	rung    = 2 // its ring started
	stopped = 3 // stopped before it rang
)

// Stop stops the alarm before it rings. It reports whether it did: false
// when the alarm rang (its function started, or is about to, on a
// goroutine of its own) or was not armed, as [time.Timer.Stop] does.
func (a *Alarm) Stop() bool {
	s := a.state.Load()
	return s&3 == armed && a.state.CompareAndSwap(s, s&^3|stopped)
}

// Set rings alarms from one timer. Its zero value is not ready: Since
// must be set.
type Set struct {
	// Since reads the clock the set's times are on: the monotonic time
	// since an epoch the caller chose.
	Since func() time.Duration

	mu       sync.Mutex    // protects the rest
	timer    *time.Timer   // made at the first Arm
	armed    bool          // timer is armed, for armedFor
	armedFor time.Duration // when the timer fires, on Since's clock
	heap     []entry       // the alarms armed, by due time
}

// entry is an arming of an alarm on the heap.
type entry struct {
	a   *Alarm
	gen uint64        // the arming's generation
	due time.Duration // when it rings, on Since's clock
}

// Arm arms a to run ring after d from now, a time on Since's clock the
// caller has just read (arming reads no clock). ring runs on a goroutine
// of its own, unless a is stopped first. a must not be armed: stopped,
// rung or new.
func (s *Set) Arm(a *Alarm, now, d time.Duration, ring func()) {
	gen := a.state.Load()>>2 + 1
	a.ring = ring
	a.state.Store(gen<<2 | armed)
	due := now + d
	s.mu.Lock() // nothing below panics: no defer, which costs more than the rest
	for len(s.heap) > 0 && verdictOf(s.heap[0], now) == drop {
		s.pop()
	}
	s.push(entry{a: a, gen: gen, due: due})
	if !s.armed || due < s.armedFor {
		s.armFor(due, d)
	}
	s.mu.Unlock()
}

// armFor arms the timer to fire after d, at due on Since's clock.
func (s *Set) armFor(due, d time.Duration) {
	s.armed, s.armedFor = true, due
	if s.timer == nil {
		s.timer = time.AfterFunc(d, s.fire)
		return
	}
	s.timer.Reset(d)
}

// action is what becomes of an entry at the top of the heap.
type action int

const (
	wait action = iota // not due yet: the timer is armed for it
	ring               // due and armed: it rings, unless stopped first
	drop               // of an arming that rang or was stopped: it goes
)

// verdictOf says what becomes of e at now.
func verdictOf(e entry, now time.Duration) action {
	return decide(e.a.state.Load(), e.gen, e.due, now)
}

// decide says what becomes of the entry of an arming of generation gen,
// due at due, at now, when its alarm's state is state: dropped when the
// alarm is armed again since, or its arming rang or was stopped; rung
// when due; left to wait otherwise.
func decide(state, gen uint64, due, now time.Duration) action {
	switch {
	case state != gen<<2|armed:
		return drop
	case due <= now:
		return ring
	}
	return wait
}

// fire is the timer's function: it rings the alarms due, drops those
// stopped at the top, and arms the timer for the next.
func (s *Set) fire() {
	now := s.Since()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = false
	for len(s.heap) > 0 {
		e := s.heap[0]
		switch verdictOf(e, now) {
		case wait:
			s.armFor(e.due, e.due-now)
			return
		case ring:
			if e.a.state.CompareAndSwap(e.gen<<2|armed, e.gen<<2|rung) {
				go e.a.ring()
			}
		}
		s.pop()
	}
}

// Len returns the number of entries on the heap, stopped or not.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.heap)
}

// push adds e to the heap.
func (s *Set) push(e entry) {
	s.heap = append(s.heap, e)
	h := s.heap
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if h[p].due <= h[i].due {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

// pop removes the heap's top, and lets a heap that grew large and
// emptied go.
func (s *Set) pop() {
	h := s.heap
	n := len(h) - 1
	h[0] = h[n]
	h[n] = entry{}
	h = h[:n]
	for i := 0; ; {
		least, l, r := i, 2*i+1, 2*i+2
		if l < n && h[l].due < h[least].due {
			least = l
		}
		if r < n && h[r].due < h[least].due {
			least = r
		}
		if least == i {
			break
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
	if n == 0 && cap(h) > maxKeptCap {
		h = nil
	}
	s.heap = h
}

// maxKeptCap is the largest heap storage kept once the heap is empty.
const maxKeptCap = 1024
