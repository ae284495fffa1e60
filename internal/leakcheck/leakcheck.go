// Package leakcheck ends a package's tests with goleak's check, patient
// enough for a busy machine: a goroutine that is still runnable at the
// end (an HTTP/2 connection's read loop finishing a frame after its
// connection closed) is given time to end, while one blocked for good
// still fails the run.
package leakcheck

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Patience is how long Main waits for the goroutines the tests started
// to end. goleak's own retries give up after about half a second, which
// a runnable goroutine can spend unscheduled on a loaded 2-core machine.
const Patience = 20 * time.Second

// Main runs m's tests and, when they pass, fails the run if goroutines
// they started are still there after Patience.
func Main(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := settle(Patience, goleak.Find); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// settle asks find until it reports nothing or patience has passed, and
// returns its last report.
func settle(patience time.Duration, find func(...goleak.Option) error) error {
	deadline := time.Now().Add(patience)
	for {
		err := find()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
