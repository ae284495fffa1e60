package redistest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/httpretry/httpretry/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func TestStartKillRestart(t *testing.T) {
	ctx := context.Background()
	srv := Start(t)
	rdb := srv.Client(t)
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	addr := srv.Addr()
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("Addr = %q; want a 127.0.0.1 address", addr)
	}
	srv.Kill()
	if err := rdb.Ping(ctx).Err(); err == nil {
		t.Fatal("PING after Kill succeeded; want an error")
	}
	srv.Kill() // a second Kill does nothing
	srv.Restart(t)
	if got := srv.Addr(); got != addr {
		t.Fatalf("Addr after Restart = %q; want %q", got, addr)
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Restart: %v", err)
	}
	// Nothing is kept across a restart: the server saves nothing.
	if n, err := rdb.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS k after Restart = %d, %v; want 0, nil", n, err)
	}
}

func TestNewWithoutBinaryNamesThePackage(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := New()
	if err == nil {
		t.Fatal("New without redis-server on PATH succeeded; want an error")
	}
	for _, want := range []string{"redistest:", "redis-server is not on PATH", "apt-get install redis-server", "brew install redis"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// The proxy forwards commands and replies, and a command chosen by
// LoseNext reaches the server while its reply does not: go-redis, reading
// EOF, sends it again, so the server runs it twice.
func TestProxyLosesReplyAfterServerRan(t *testing.T) {
	ctx := context.Background()
	srv := Start(t)
	p := StartProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	if err := rdb.Set(ctx, "n", 0, 0).Err(); err != nil {
		t.Fatalf("SET through the proxy: %v", err)
	}
	p.LoseNext("incr", 1)
	if got, err := rdb.Incr(ctx, "n").Result(); err != nil || got != 2 {
		t.Fatalf("INCR = %d, %v; want 2 (run, reply lost, re-sent, run again), nil", got, err)
	}
	if got := p.Lost(); got != 1 {
		t.Fatalf("Lost = %d; want 1", got)
	}
	direct := srv.Client(t)
	if got, err := direct.Get(ctx, "n").Int(); err != nil || got != 2 {
		t.Fatalf("n on the server = %d, %v; want 2", got, err)
	}
}

// LoseRate loses about its share of the replies, and never the reply to
// a command sent again after its reply was lost: every command succeeds,
// and each lost reply is one command the server ran twice.
func TestProxyLoseRate(t *testing.T) {
	ctx := context.Background()
	srv := Start(t)
	p := StartProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	p.LoseRate("incr", 100, 7)
	const n = 400
	for i := range n {
		if err := rdb.Incr(ctx, fmt.Sprint("n", i)).Err(); err != nil {
			t.Fatalf("INCR %d: %v", i, err)
		}
	}
	lost := p.Lost()
	if lost < 10 || lost > 100 {
		t.Fatalf("Lost = %d of %d commands; want about 10%%", lost, n)
	}
	direct := srv.Client(t)
	twice := int64(0)
	for i := range n {
		switch v, _ := direct.Get(ctx, fmt.Sprint("n", i)).Int64(); v {
		case 1:
		case 2:
			twice++
		default:
			t.Fatalf("n%d = %d; want 1, or 2 after a lost reply", i, v)
		}
	}
	if twice != lost {
		t.Fatalf("commands run twice = %d; want one per lost reply (%d)", twice, lost)
	}
}

// A command chosen by DropNext never reaches the server: go-redis, reading
// EOF, sends it again, and once the drops are spent the server runs it
// once; with more drops than go-redis's retries, the call fails and the
// server ran nothing.
func TestProxyDropsCommandBeforeServer(t *testing.T) {
	ctx := context.Background()
	srv := Start(t)
	p := StartProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	p.DropNext("incr", 1)
	if got, err := rdb.Incr(ctx, "n").Result(); err != nil || got != 1 {
		t.Fatalf("INCR = %d, %v; want 1 (dropped, re-sent, run once), nil", got, err)
	}
	p.DropNext("incr", 4) // the first delivery and go-redis's 3 retries
	if err := rdb.Incr(ctx, "n").Err(); err == nil {
		t.Fatal("INCR with every delivery dropped succeeded; want an error")
	}
	if got := p.Dropped(); got != 5 {
		t.Fatalf("Dropped = %d; want 5", got)
	}
	direct := srv.Client(t)
	if got, err := direct.Get(ctx, "n").Int(); err != nil || got != 1 {
		t.Fatalf("n on the server = %d, %v; want 1", got, err)
	}
}
