package redistest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

func TestNewSentinelWithoutRedisSentinelNamesThePackage(t *testing.T) {
	// PATH holds redis-server alone.
	dir := t.TempDir()
	server, err := exec.LookPath(Binary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(server, filepath.Join(dir, Binary)); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	_, err = NewSentinel()
	if err == nil {
		t.Fatal("NewSentinel without redis-sentinel on PATH succeeded; want an error")
	}
	for _, want := range []string{"redis-sentinel is not on PATH", "apt-get install redis-sentinel"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}
