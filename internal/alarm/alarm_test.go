package alarm

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// decide drops an entry whose arming is not the alarm's current one or
// not armed any more, rings one due, and leaves one not due to wait.
func TestDecide(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		state    uint64
		gen      uint64
		due, now time.Duration
		want     action
	}{
		{"armed, due now", 3<<2 | armed, 3, 10, 10, ring},
		{"armed, overdue", 3<<2 | armed, 3, 10, 11, ring},
		{"armed, a nanosecond early", 3<<2 | armed, 3, 10, 9, wait},
		{"stopped before due", 3<<2 | stopped, 3, 10, 9, drop},
		{"stopped, due", 3<<2 | stopped, 3, 10, 10, drop},
		{"rung", 3<<2 | rung, 3, 10, 10, drop},
		{"armed again since, the new arming due", 4<<2 | armed, 3, 10, 10, drop},
		{"armed again since, an older arming", 2<<2 | armed, 3, 10, 10, drop},
		{"never armed", idle, 0, 10, 10, drop},
	} {
		if got := decide(c.state, c.gen, c.due, c.now); got != c.want {
			t.Errorf("%s: decide = %d; want %d", c.name, got, c.want)
		}
	}
}

// manual is a set on a clock the test moves, whose timer is armed for
// hours from now (on the real clock): it never fires on its own; the
// test calls fire.
type manual struct {
	Set
	now time.Duration
}

func newManual(t *testing.T) *manual {
	m := &manual{now: time.Hour}
	m.Since = func() time.Duration { return m.now }
	t.Cleanup(func() {
		if m.timer != nil {
			m.timer.Stop()
		}
	})
	return m
}

// ringer counts the rings of an alarm and signals each.
type ringer struct {
	a     Alarm
	rings atomic.Int32
	rang  chan struct{}
}

func newRinger() *ringer { return &ringer{rang: make(chan struct{}, 16)} }

func (r *ringer) ring() { r.rings.Add(1); r.rang <- struct{}{} }

// await waits for n rings of r.
func (r *ringer) await(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-r.rang:
		case <-time.After(time.Minute):
			t.Fatalf("%d rings after a minute; want %d", r.rings.Load(), n)
		}
	}
}

// fire rings what is due at the set's clock: the alarms due and not
// stopped ring, once each; those stopped are dropped; the timer is then
// armed for the earliest left.
func TestFireRingsWhatIsDueAndArmsForTheNext(t *testing.T) {
	m := newManual(t)
	a, b, c := newRinger(), newRinger(), newRinger()
	m.Arm(&a.a, m.now, 10*time.Hour, a.ring)
	m.Arm(&b.a, m.now, 20*time.Hour, b.ring)
	m.Arm(&c.a, m.now, 30*time.Hour, c.ring)
	if !m.armed || m.armedFor != 11*time.Hour {
		t.Fatalf("armed %v for %v; want armed for the earliest, 11h", m.armed, m.armedFor)
	}
	if !b.a.Stop() {
		t.Fatal("Stop of an armed alarm = false; want true")
	}
	m.now = 25 * time.Hour
	m.fire()
	a.await(t, 1)
	if got := m.Len(); got != 1 || m.armedFor != 31*time.Hour {
		t.Fatalf("after the fire at 25h: %d entries, armed for %v; want 1, for 31h (c's)", got, m.armedFor)
	}
	if a.a.Stop() {
		t.Error("Stop of a rung alarm = true; want false")
	}
	m.now = 31 * time.Hour
	m.fire()
	c.await(t, 1)
	if m.Len() != 0 || m.armed {
		t.Fatalf("after every alarm rang: %d entries, armed %v; want none, not armed", m.Len(), m.armed)
	}
	if a.rings.Load() != 1 || b.rings.Load() != 0 || c.rings.Load() != 1 {
		t.Fatalf("rings a %d, b %d, c %d; want 1, 0 (stopped), 1", a.rings.Load(), b.rings.Load(), c.rings.Load())
	}
}

// An alarm stopped and armed again is rung for its new arming only: the
// entry of the first, still on the heap and due first, rings nothing.
func TestAnEarlierArmingNeverRingsTheAlarmArmedAgain(t *testing.T) {
	m := newManual(t)
	r := newRinger()
	m.Arm(&r.a, m.now, time.Hour, r.ring)
	if !r.a.Stop() {
		t.Fatal("Stop = false; want true")
	}
	m.Arm(&r.a, m.now, 5*time.Hour, r.ring)
	m.now += 2 * time.Hour
	m.fire() // the first arming is due; the alarm is armed for later
	if r.rings.Load() != 0 {
		t.Fatalf("the alarm rang %d times 2h into an arming of 5h", r.rings.Load())
	}
	if m.Len() != 1 || m.armedFor != 6*time.Hour {
		t.Fatalf("%d entries, armed for %v; want the new arming's alone, for 6h", m.Len(), m.armedFor)
	}
	m.now += 3 * time.Hour
	m.fire()
	r.await(t, 1)
	if r.a.Stop() {
		t.Error("Stop after the ring = true; want false")
	}
}

// Alarms armed for a like delay and stopped before it, one after the
// other, keep the heap at one or two entries: each Arm drops the
// stopped entries at the top.
func TestStoppedAlarmsLeaveTheHeapAsTheNextIsArmed(t *testing.T) {
	m := newManual(t)
	r := newRinger()
	for i := range 1000 {
		m.now += time.Millisecond
		m.Arm(&r.a, m.now, time.Hour, r.ring)
		if n := m.Len(); n > 1 {
			t.Fatalf("arming %d: %d entries; want 1, the stopped ones dropped", i, n)
		}
		if !r.a.Stop() {
			t.Fatalf("arming %d: Stop = false", i)
		}
	}
	// One alarm left armed keeps those after it until it rings.
	held := newRinger()
	m.Arm(&held.a, m.now, time.Hour, held.ring)
	for range 10 {
		m.now += time.Millisecond
		m.Arm(&r.a, m.now, time.Hour, r.ring)
		r.a.Stop()
	}
	if n := m.Len(); n != 11 {
		t.Fatalf("%d entries behind an alarm left armed; want 11", n)
	}
	m.now += time.Hour
	m.fire()
	held.await(t, 1)
	if n := m.Len(); n != 0 || r.rings.Load() != 0 {
		t.Fatalf("after the held alarm rang: %d entries, %d rings of the stopped; want 0, 0", n, r.rings.Load())
	}
}

// An alarm armed for sooner than the one the timer waits for moves the
// timer to it.
func TestAnEarlierAlarmMovesTheTimer(t *testing.T) {
	m := newManual(t)
	late, soon := newRinger(), newRinger()
	m.Arm(&late.a, m.now, 10*time.Hour, late.ring)
	m.Arm(&soon.a, m.now, 2*time.Hour, soon.ring)
	if m.armedFor != 3*time.Hour {
		t.Fatalf("armed for %v; want 3h, the sooner alarm's", m.armedFor)
	}
	m.now = 3 * time.Hour
	m.fire()
	soon.await(t, 1)
	if m.armedFor != 11*time.Hour || late.rings.Load() != 0 {
		t.Fatalf("armed for %v, late rang %d; want 11h, 0", m.armedFor, late.rings.Load())
	}
}

// On the real clock, from goroutines at once, each arming either rings
// once, no sooner than its delay, or is stopped (Stop returned true), never
// both, never neither.
func TestEveryArmingRingsOnceOrIsStopped(t *testing.T) {
	t.Parallel()
	epoch := time.Now()
	s := &Set{Since: func() time.Duration { return time.Since(epoch) }}
	const workers, rounds = 8, 200
	var rings, stops atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(w), 1))
			var a Alarm
			done := make(chan time.Duration, 1)
			for range rounds {
				d := time.Duration(rnd.IntN(300)) * time.Microsecond
				now := s.Since()
				s.Arm(&a, now, d, func() { done <- s.Since() - now })
				time.Sleep(time.Duration(rnd.IntN(300)) * time.Microsecond)
				if a.Stop() {
					stops.Add(1)
					continue
				}
				if after := <-done; after < d {
					t.Errorf("rang %v after arming; want no sooner than its delay %v", after, d)
				}
				rings.Add(1)
			}
		}()
	}
	wg.Wait()
	if got := rings.Load() + stops.Load(); got != workers*rounds {
		t.Fatalf("%d rang + %d stopped = %d; want %d, one each", rings.Load(), stops.Load(), got, workers*rounds)
	}
	// Every arming ended: the timer rings the heap empty within the
	// longest delay.
	deadline := time.Now().Add(time.Minute)
	for s.Len() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d entries a minute after every arming ended", s.Len())
		}
		time.Sleep(time.Millisecond)
	}
}

// An alarm armed from a time read a while ago, due already, rings at
// once: the timer is set from the clock read when it moves, never for the
// whole delay from now, which would make it and every alarm due before it
// ring late.
func TestAnAlarmArmedFromATimeReadAWhileAgoRingsWhenDue(t *testing.T) {
	m := newManual(t)
	r := newRinger()
	m.now = 10 * time.Hour
	m.Arm(&r.a, time.Hour, time.Hour, r.ring) // due at 2h, 8h ago
	r.await(t, 1)
}

// Stopped entries of long delays under an armed one of a short delay are
// swept out as the heap doubles: the heap stays within twice the greater
// of minSweep and the alarms armed, and what is armed still rings, once.
func TestStoppedAlarmsUnderAnArmedOneAreSweptOut(t *testing.T) {
	m := newManual(t)
	held := newRinger()
	m.Arm(&held.a, m.now, time.Minute, held.ring)
	r := newRinger()
	most := 0
	for range 1000 {
		m.now += time.Millisecond
		m.Arm(&r.a, m.now, time.Hour, r.ring)
		most = max(most, m.Len())
		r.a.Stop()
	}
	if most > 2*minSweep {
		t.Fatalf("the heap held up to %d entries behind one armed alarm; want at most %d", most, 2*minSweep)
	}
	m.Arm(&r.a, m.now, time.Hour, r.ring) // the last arming, left armed
	m.now += 2 * time.Hour
	m.fire()
	held.await(t, 1)
	r.await(t, 1)
	if held.rings.Load() != 1 || r.rings.Load() != 1 || m.Len() != 0 {
		t.Fatalf("rings %d and %d, %d entries left; want 1, 1 and none", held.rings.Load(), r.rings.Load(), m.Len())
	}
}
