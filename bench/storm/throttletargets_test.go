package main

import (
	"context"
	"io"
	"os"
	"testing"
	"time"
)

// TestThrottleTargets runs the throttle scenarios at a smaller scale than
// make throttle (2 s healthy phases, a 4 s outage) and fails on every
// target the run misses. It takes about two minutes of real time, so it
// runs only with STORM_TARGETS=1:
//
//	STORM_TARGETS=1 go test -run TestThrottleTargets -v ./storm
func TestThrottleTargets(t *testing.T) {
	if os.Getenv("STORM_TARGETS") != "1" {
		t.Skip("set STORM_TARGETS=1: about two minutes of real time")
	}
	c := defaultTConfig(config{rate: 200, capacity: 20, service: 20 * time.Millisecond, deadline: time.Second, seed: 1, log: io.Discard})
	c.healthy, c.outage, c.brownout = 2*time.Second, 4*time.Second, 2*time.Second
	c.scenarios = []string{"throttle-outage", "throttle-brownout", "two-hosts", "throttle-fleet"}
	res := runThrottle(context.Background(), c)
	lines, ts := throttleLines(res)
	for _, l := range lines {
		t.Log(l)
	}
	for _, x := range ts {
		if !x.met {
			t.Errorf("missed: %s: %s", x.name, x.measured)
		}
	}
}
