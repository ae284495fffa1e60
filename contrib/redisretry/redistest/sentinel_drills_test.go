//go:build drills

// Tests of the harness that wait for failovers: they run with the drills
// (make redis-drills), not in make test.

package redistest

import (
	"context"
	"testing"
)

// The sentinels report the primary they were started with, a write
// through the failover client reaches it and its replica, SENTINEL
// FAILOVER swaps the two, and KillPrimary promotes the replica, which
// then holds the writes it had received.
func TestSentinelReportsPrimaryAndFailsOver(t *testing.T) {
	ctx := context.Background()
	s := StartSentinel(t)
	if got := len(s.SentinelAddrs()); got != 3 {
		t.Fatalf("SentinelAddrs = %d; want 3", got)
	}
	first, err := s.Primary()
	if err != nil {
		t.Fatal(err)
	}
	if first != s.data[0] {
		t.Fatalf("Primary = %s; want the first server started, %s", first.Addr(), s.data[0].Addr())
	}
	rdb := s.Client(t)
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.Wait(ctx, 1, 5000).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT = %d, %v; want 1 replica", n, err)
	}

	if err := s.Failover(); err != nil {
		t.Fatal(err)
	}
	second, err := s.Primary()
	if err != nil || second != s.data[1] {
		t.Fatalf("Primary after Failover = %v, %v; want the replica", second, err)
	}
	if got, err := rdb.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET after Failover = %q, %v; want v", got, err)
	}

	killed, err := s.KillPrimary()
	if err != nil {
		t.Fatal(err)
	}
	if killed != second {
		t.Fatalf("KillPrimary killed %s; want %s", killed.Addr(), second.Addr())
	}
	third, err := s.Primary()
	if err != nil || third != first {
		t.Fatalf("Primary after KillPrimary = %v, %v; want the first server again", third, err)
	}
	if got, err := rdb.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET after KillPrimary = %q, %v; want v", got, err)
	}
	killed.Restart(t)
	if err := s.Wait(); err != nil {
		t.Fatal(err)
	}
}

// A primary with two replicas: a write reaches both (WAIT 2), SENTINEL
// FAILOVER promotes one of them, and the old primary and the other
// replica then replicate from it, so that a write reaches two replicas
// again.
func TestSentinelWithTwoReplicasFailsOverToOneOfThem(t *testing.T) {
	ctx := context.Background()
	s := StartSentinelReplicas(t, 2)
	first, err := s.Primary()
	if err != nil {
		t.Fatal(err)
	}
	replicas, err := s.Replicas()
	if err != nil || len(replicas) != 2 {
		t.Fatalf("Replicas = %v, %v; want 2", replicas, err)
	}
	rdb := s.Client(t)
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.Wait(ctx, 2, 5000).Result(); err != nil || n != 2 {
		t.Fatalf("WAIT 2 = %d, %v; want 2 replicas", n, err)
	}
	if err := s.Failover(); err != nil {
		t.Fatal(err)
	}
	second, err := s.Primary()
	if err != nil || (second != replicas[0] && second != replicas[1]) {
		t.Fatalf("Primary after Failover = %v, %v; want one of the replicas", second, err)
	}
	after, err := s.Replicas()
	if err != nil || len(after) != 2 || (after[0] != first && after[1] != first) {
		t.Fatalf("Replicas after Failover = %v, %v; want the old primary among two", after, err)
	}
	if err := rdb.Set(ctx, "k2", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.Wait(ctx, 2, 5000).Result(); err != nil || n != 2 {
		t.Fatalf("WAIT 2 after Failover = %d, %v; want 2 replicas", n, err)
	}
	if got, err := rdb.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET after Failover = %q, %v; want v", got, err)
	}
}
