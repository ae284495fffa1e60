package alarm

import (
	"testing"
	"time"
)

// Stop reports false once an alarm rang, "its function started, or is
// about to", and an alarm "may be armed again once it rang or was
// stopped": its owner may arm it again, with another function, as soon
// as Stop says false. The ring under way runs the function of the arming
// that rang, never the new one, and the new one rings only when due.
func TestAlarmArmedAgainAsSoonAsItRangRunsEachArmingsOwnFunction(t *testing.T) {
	for range 200 {
		m := newManual(t)
		first, second := newRinger(), newRinger()
		var a Alarm
		m.Arm(&a, m.now, time.Hour, first.ring)
		m.now += 2 * time.Hour
		fired := make(chan struct{})
		go func() { m.fire(); close(fired) }()
		// The owner sees the ring start (Stop false), and arms again.
		for a.state.Load()&3 != rung {
		}
		if a.Stop() {
			t.Fatal("Stop of an alarm that rang = true")
		}
		m.Arm(&a, 2*time.Hour, 10*time.Hour, second.ring)
		<-fired
		first.await(t, 1)
		if first.rings.Load() != 1 || second.rings.Load() != 0 {
			t.Fatalf("rings of the arming that rang %d, of the one armed again for 10h %d; want 1 and 0", first.rings.Load(), second.rings.Load())
		}
		if !a.Stop() {
			t.Fatal("Stop of the second arming, not due = false")
		}
	}
}
