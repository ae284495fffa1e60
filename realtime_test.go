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

// secondsOfRealTime marks a test that waits seconds of real time, in all
// (a pause of a second, a quota's windows, a stream left idle, many
// subtests of a few hundred milliseconds): -short leaves it out, so that
// make check stays the fast loop; make test runs it. It is a realTime
// test too.
func secondsOfRealTime(t *testing.T) {
	t.Helper()
	realTime(t)
	if testing.Short() {
		t.Skip("waits seconds of real time: -short leaves it out; make test runs it")
	}
}
