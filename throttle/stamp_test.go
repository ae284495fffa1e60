package throttle

import (
	"strings"
	"testing"
	"time"
)

// TestStampKeepsTheMonotonicReading: a pause or a reset is kept as a
// stamp and read back as a time. For a time read from the system clock
// the stamp is taken on the monotonic clock, and the time read back
// carries a monotonic reading, so that the delay a caller computes from
// it (reset.Sub(now)) is on the monotonic clock too: a wall clock stepped
// back an hour moves neither. A fake clock's time, without a reading,
// comes back as the same instant.
func TestStampKeepsTheMonotonicReading(t *testing.T) {
	t.Parallel()
	now := time.Now()
	if !strings.Contains(now.String(), " m=") {
		t.Skip("this platform's clock has no monotonic reading")
	}
	reset := instant(stamp(now.Add(time.Second)))
	if !strings.Contains(reset.String(), " m=") {
		t.Errorf("instant(stamp(now + 1s)) = %v; want a monotonic reading", reset)
	}
	if d := reset.Sub(now); d != time.Second {
		t.Errorf("reset − now = %v; want 1s", d)
	}
	fake := time.Date(1984, time.April, 4, 0, 0, 0, 0, time.UTC)
	if got := instant(stamp(fake)); !got.Equal(fake) {
		t.Errorf("instant(stamp(%v)) = %v; want the same instant", fake, got)
	}
	if stamp(fake) <= 0 || stamp(now.Add(100*365*24*time.Hour)) <= 0 {
		t.Error("a stamp within a century of now is not positive; 0 means none")
	}
	if instant(0) != (time.Time{}) {
		t.Error("instant(0) is not the zero Time")
	}
}
