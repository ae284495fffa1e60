package main

import (
	"context"
	"io"
	"os"
	"testing"
	"time"
)

// TestSharedFleetTargets runs the shared-state fleet as make throttle
// does (a thousand processes at one operation a second, 4 s healthy, a
// 10 s outage, 4 s healthy) and fails on every target it misses. It
// takes about a minute and a half of real time and a redis-server, so it
// runs only with STORM_TARGETS=1:
//
//	STORM_TARGETS=1 go test -run TestSharedFleetTargets -v ./storm
func TestSharedFleetTargets(t *testing.T) {
	if os.Getenv("STORM_TARGETS") != "1" {
		t.Skip("set STORM_TARGETS=1: about a minute and a half of real time")
	}
	c := defaultTConfig(config{rate: 200, capacity: 20, service: 20 * time.Millisecond, deadline: time.Second, seed: 1, log: io.Discard})
	s := runSharedFleet(context.Background(), c, t.Logf)
	l, ts, _ := sharedFleetLine(s)
	t.Log(l)
	if s.commands != nil {
		t.Log("Redis commands:", s.commands)
	}
	for _, x := range ts {
		if !x.met {
			t.Errorf("missed: %s: %s", x.name, x.measured)
		}
	}
}
