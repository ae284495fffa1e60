package httpretry

import "testing"

// realTime marks a test that waits real time: loopback sockets and real
// timers, a tenth of a second or more. make mutate's build leaves it out,
// since every mutant runs the whole suite and these tests are most of its
// time; the rules they hold on real sockets are held with fake clocks
// too. make check and make test run them all.
func realTime(t *testing.T) {
	t.Helper()
	if mutationBuild {
		t.Skip("waits real time: left out of make mutate's build")
	}
}
