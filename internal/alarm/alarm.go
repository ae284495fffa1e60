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
// An alarm stopped stays on the heap until the next Arm or ring finds it
// at the top and drops it, or, when the heap has doubled since it was
// last swept, the next Arm sweeps every stopped entry out. When alarms
// are armed for a like delay, the top is the oldest, stopped already in
// the common case, and the heap holds about as many entries as alarms
// armed and not stopped; with unlike delays, stopped entries of long
// delays wait under armed ones of short delays until a sweep. The heap
// never holds more than twice the greater of minSweep and the alarms
// armed, not stopped, at the last sweep.
//
// A set has one lock, taken by every Arm: goroutines arming at once on
// many cores wait for each other, where runtime timers are kept per P.
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
	sweepAt  int           // the heap's length at which Arm sweeps it next; 0 for minSweep
}

// minSweep is the least heap length at which Arm sweeps the stopped
// entries out.
const minSweep = 32

// entry is an arming of an alarm on the heap.
type entry struct {
	a    *Alarm
	gen  uint64        // the arming's generation
	due  time.Duration // when it rings, on Since's clock
	ring func()        // what it runs: the arming's own, even if the alarm is armed again as it rings
}

// Arm arms a to run ring once d passed from now, a time on Since's clock
// the caller read (arming reads the clock only when it moves the timer
// earlier). ring runs on a goroutine of its own, unless a is stopped
// first. a must not be armed: stopped, rung or new.
func (s *Set) Arm(a *Alarm, now, d time.Duration, ring func()) {
	gen := a.state.Load()>>2 + 1
	a.state.Store(gen<<2 | armed)
	due := now + d
	s.mu.Lock() // nothing below panics: no defer, which costs more than the rest
	for len(s.heap) > 0 && verdictOf(s.heap[0], now) == drop {
		s.pop()
	}
	if len(s.heap) >= max(s.sweepAt, minSweep) {
		s.sweep()
	}
	s.push(entry{a: a, gen: gen, due: due, ring: ring})
	if !s.armed || due < s.armedFor {
		// From the clock read now: now may be a while ago, and a
		// timer set for d from now would fire after due.
		s.armFor(due, max(0, due-s.Since()))
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

// sweep drops every entry of an arming that rang or was stopped, and
// sets the length at which the heap is swept again: twice what is left.
func (s *Set) sweep() {
	kept := s.heap[:0]
	for _, e := range s.heap {
		if current(e.a.state.Load(), e.gen) {
			kept = append(kept, e)
		}
	}
	clear(s.heap[len(kept):])
	s.heap = kept
	for i := len(kept)/2 - 1; i >= 0; i-- {
		s.down(i)
	}
	s.sweepAt = 2 * max(len(kept), minSweep)
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
	case !current(state, gen):
		return drop
	case due <= now:
		return ring
	}
	return wait
}

// current reports whether an alarm whose state is state is armed, for
// the arming of generation gen.
func current(state, gen uint64) bool { return state == gen<<2|armed }

// fire is the timer's function: it rings the alarms due, drops those
// stopped at the top, and arms the timer for the next.
func (s *Set) fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.Since() // under the lock: a wait for it would make the next arming late
	s.armed = false
	for len(s.heap) > 0 {
		e := s.heap[0]
		switch verdictOf(e, now) {
		case wait:
			s.armFor(e.due, e.due-now)
			return
		case ring:
			if e.a.state.CompareAndSwap(e.gen<<2|armed, e.gen<<2|rung) {
				go e.ring()
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
	n := len(s.heap) - 1
	s.heap[0] = s.heap[n]
	s.heap[n] = entry{}
	s.heap = s.heap[:n]
	s.down(0)
	if n == 0 {
		s.sweepAt = 0 // the next sweep is for what is armed from now on
		if cap(s.heap) > maxKeptCap {
			s.heap = nil
		}
	}
}

// down moves the heap's entry i down to its place.
func (s *Set) down(i int) {
	h, n := s.heap, len(s.heap)
	for {
		least, l, r := i, 2*i+1, 2*i+2
		if l < n && h[l].due < h[least].due {
			least = l
		}
		if r < n && h[r].due < h[least].due {
			least = r
		}
		if least == i {
			return
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
}

// maxKeptCap is the largest heap storage kept once the heap is empty.
const maxKeptCap = 1024
