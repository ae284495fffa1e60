package redisretry

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
)

// slack is added to every upper bound on how long a call may take: far
// more than any scheduler delay, far less than a client's 3s read timeout
// that the bounds are there to beat.
const slack = time.Second

// timed runs f and returns how long it took.
func timed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

func TestRedisKilledAndRestarted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, rdb := server(t)
	var log stateLog
	// Long enough for a loaded machine's Redis to answer, and for
	// go-redis to give up redialling a dead one; far below the caller's.
	const callTimeout = 2 * time.Second
	// No lease: the test counts the local bucket's tokens one by one.
	b := newBudget(t, rdb, "killed", 20, 0.1, Options{
		OnStateChange:    log.add,
		MaxProbeInterval: 100 * time.Millisecond,
		CallTimeout:      callTimeout,
		MaxLease:         -1,
	})
	if !b.Withdraw(ctx) {
		t.Fatal("Withdraw from a full shared bucket refused")
	}
	srv.Kill()

	// The first call after the crash fails within CallTimeout and falls
	// back to the local bucket of 20/10 = 2 tokens; the others are local.
	var got []bool
	for range 3 {
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		var ok bool
		if d := timed(func() { ok = b.Withdraw(wctx) }); d > callTimeout+slack {
			t.Errorf("Withdraw with Redis down took %v; want at most %v", d, callTimeout+slack)
		}
		cancel()
		got = append(got, ok)
	}
	if want := []bool{true, true, false}; !slices.Equal(got, want) {
		t.Fatalf("withdrawals with Redis down = %v; want %v (the local bucket's 2 tokens)", got, want)
	}
	if s := b.State(); s != Local {
		t.Fatalf("state = %v; want local", s)
	}
	// Deposits in the local state go to the local bucket.
	for range 10 {
		b.Deposit()
	}
	if !b.Withdraw(ctx) || b.Withdraw(ctx) {
		t.Fatal("10 local deposits of 0.1 did not make exactly one local token")
	}

	srv.Restart(t)
	eventually(t, "back to the shared bucket", func() bool { return b.State() == Shared })
	if want := []State{Local, Shared}; !slices.Equal(log.states(), want) {
		t.Fatalf("reported %v; want %v", log.states(), want)
	}
	// The restarted server lost the key: the probe made it full again,
	// and the shared bucket serves withdrawals.
	if got := drain(t, b); got != 20 {
		t.Fatalf("drained %d from the restarted shared bucket; want 20", got)
	}
	if got := tokens(t, b); got != 0 {
		t.Fatalf("tokens = %v; want 0", got)
	}
	if want := []State{Local, Shared}; !slices.Equal(log.states(), want) {
		t.Fatalf("reported %v after draining; want %v: one report per change", log.states(), want)
	}
}

func TestConcurrentWithdrawalsAtACrash(t *testing.T) {
	t.Parallel()
	srv, rdb := server(t)
	var log stateLog
	b := newBudget(t, rdb, "crash-concurrent", 1000, 0.1, Options{OnStateChange: log.add, FleetSize: 1})
	srv.Kill()
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if d := timed(func() { b.Withdraw(ctx) }); d > DefaultCallTimeout+slack {
				t.Errorf("Withdraw took %v; want at most %v", d, DefaultCallTimeout+slack)
			}
		})
	}
	wg.Wait()
	if want := []State{Local}; !slices.Equal(log.states(), want) {
		t.Fatalf("50 failing withdrawals reported %v; want %v, once", log.states(), want)
	}
}

// silentServer accepts connections and never answers, as a Redis that
// hangs would; it closes them when t ends.
func silentServer(t *testing.T) string {
	addr, _ := countingSilentServer(t)
	return addr
}

// countingSilentServer is silentServer that also reports how many
// connections it accepted so far.
func countingSilentServer(t *testing.T) (string, func() int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return l.Addr().String(), func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(conns)
	}
}

func TestOneCallAtATimeToASilentRedis(t *testing.T) {
	t.Parallel()
	addr, accepted := countingSilentServer(t)
	// Without ContextTimeoutEnabled an abandoned call waits for the
	// ReadTimeout on its own connection: a prober that did not wait for
	// it would open a connection per probe.
	rdb := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: 2 * time.Second, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	// No announcements: their subscription is a connection of its own.
	b := newBudget(t, rdb, "one-at-a-time", 20, 0.1, Options{FlushInterval: 5 * time.Millisecond, MaxProbeInterval: 10 * time.Millisecond, RefusalMemory: -1})
	if !b.Withdraw(context.Background()) || b.State() != Local {
		t.Fatal("want a local token after the call timed out")
	}
	time.Sleep(500 * time.Millisecond) // some 30 probe times
	if n := accepted(); n > 1 {
		t.Fatalf("%d connections while the first call still waited; want 1", n)
	}
}

func TestRedisThatNeverAnswers(t *testing.T) {
	t.Parallel()
	addr := silentServer(t)
	// A client as most programs configure it: no ContextTimeoutEnabled,
	// so go-redis itself would wait for its ReadTimeout.
	const readTimeout = 2 * time.Second
	rdb := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: readTimeout, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })

	t.Run("per-call limit", func(t *testing.T) {
		t.Parallel()
		var log stateLog
		b := newBudget(t, rdb, "silent", 20, 0.1, Options{OnStateChange: log.add})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var ok bool
		if d := timed(func() { ok = b.Withdraw(ctx) }); d > DefaultCallTimeout+slack {
			t.Fatalf("Withdraw took %v; want at most %v", d, DefaultCallTimeout+slack)
		}
		if !ok {
			t.Fatal("Withdraw refused; want a token from the local bucket")
		}
		if want := []State{Local}; !slices.Equal(log.states(), want) {
			t.Fatalf("reported %v; want %v", log.states(), want)
		}
		if _, err := b.Tokens(ctx); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "redisretry: key \"silent\": no answer from Redis in time") {
			t.Fatalf("Tokens error = %v; want a timeout naming the key", err)
		}
	})
	t.Run("caller's deadline", func(t *testing.T) {
		t.Parallel()
		// The caller's deadline comes before a long per-call limit: the
		// Withdraw returns by it, refuses (the operation is over), and
		// passes no verdict on Redis.
		var log stateLog
		b := newBudget(t, rdb, "silent-caller", 20, 0.1, Options{OnStateChange: log.add, CallTimeout: time.Minute, FlushInterval: time.Hour})
		const deadline = 30 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		var ok bool
		if d := timed(func() { ok = b.Withdraw(ctx) }); d > deadline+slack {
			t.Fatalf("Withdraw took %v; want at most %v", d, deadline+slack)
		}
		if ok {
			t.Fatal("Withdraw granted past the caller's deadline")
		}
		if len(log.states()) != 0 || b.State() != Shared {
			t.Fatalf("reported %v, state %v; want no change", log.states(), b.State())
		}
	})
}

func TestKeyOfTheWrongType(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, rdb := server(t)
	tests := []struct {
		name  string
		setup func(key string) error
		code  string
	}{
		{"list", func(k string) error { return rdb.RPush(ctx, k, "x").Err() }, "WRONGTYPE"},
		{"hash", func(k string) error { return rdb.HSet(ctx, k, "f", "v").Err() }, "WRONGTYPE"},
		{"text", func(k string) error { return rdb.Set(ctx, k, "hello", 0).Err() }, "BADTOKENS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := "wrong:" + tt.name
			if err := tt.setup(key); err != nil {
				t.Fatal(err)
			}
			var buf syncBuffer
			logger := slog.New(slog.NewTextHandler(&buf, nil))
			var log stateLog
			b := newBudget(t, rdb, key, 20, 0.1, Options{OnStateChange: log.add, Logger: logger, MaxProbeInterval: 20 * time.Millisecond, CallTimeout: patient})
			if !b.Withdraw(ctx) {
				t.Fatal("Withdraw refused; want a token from the local bucket")
			}
			if s := b.State(); s != Local {
				t.Fatalf("state = %v; want local", s)
			}
			_, err := b.Tokens(ctx)
			if err == nil || !strings.Contains(err.Error(), "redisretry: key \""+key+"\" holds something other than a token count") {
				t.Fatalf("Tokens error = %v; want one naming the key and the problem", err)
			}
			// The probes keep failing without another report.
			time.Sleep(100 * time.Millisecond)
			if want := []State{Local}; !slices.Equal(log.states(), want) {
				t.Fatalf("reported %v; want %v", log.states(), want)
			}
			if n := strings.Count(buf.String(), "level=WARN"); n != 1 || !strings.Contains(buf.String(), tt.code) {
				t.Fatalf("log = %q; want one warning carrying %s", buf.String(), tt.code)
			}
			// Once the key is freed, a probe brings the budget back.
			rdb.Del(ctx, key)
			eventually(t, "back to the shared bucket", func() bool { return b.State() == Shared })
			if got := tokens(t, b); got != 20 {
				t.Fatalf("tokens = %v; want 20", got)
			}
			eventually(t, "the return logged", func() bool { return strings.Contains(buf.String(), "level=INFO") })
			if n := strings.Count(buf.String(), "level=INFO"); n != 1 {
				t.Fatalf("log = %q; want one info record for the return", buf.String())
			}
		})
	}
}

// TestWithdrawUnderAFakeClock: a Transport with a fake clock hands
// Withdraw a context of that clock, whose Err blocks while it is live. A
// timed-out call must still return and fall back.
func TestWithdrawUnderAFakeClock(t *testing.T) {
	t.Parallel()
	addr := silentServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	b := newBudget(t, rdb, "fake-clock", 20, 0.1, Options{})
	clock := clockwork.NewFakeClock()
	ctx, cancel := clockwork.WithTimeout(context.Background(), clock, time.Hour)
	defer cancel()
	done := make(chan bool, 1)
	go func() { done <- b.Withdraw(ctx) }()
	select {
	case ok := <-done:
		if !ok || b.State() != Local {
			t.Fatalf("Withdraw = %v, state %v; want a local token", ok, b.State())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Withdraw under a live fake-clock context did not return")
	}
}

func TestNextBackoff(t *testing.T) {
	t.Parallel()
	const first, limit = 100 * time.Millisecond, time.Second
	tests := []struct {
		name string
		last time.Duration
		ok   bool
		want time.Duration
	}{
		{"success starts over", 800 * time.Millisecond, true, first},
		{"a failure doubles", first, false, 2 * first},
		{"up to the limit", 800 * time.Millisecond, false, limit},
		{"never past it", limit, false, limit},
		{"never under the first", 0, false, first},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nextBackoff(tt.last, tt.ok, first, limit); got != tt.want {
				t.Errorf("nextBackoff(%v, %v, %v, %v) = %v; want %v", tt.last, tt.ok, first, limit, got, tt.want)
			}
		})
	}
}

func TestSpread(t *testing.T) {
	t.Parallel()
	tests := []struct {
		r    float64
		want time.Duration
	}{
		{0, 500 * time.Millisecond},
		{0.5, 750 * time.Millisecond},
		{0.999999, 999999500 * time.Nanosecond},
	}
	for _, tt := range tests {
		if got := spread(time.Second, tt.r); got != tt.want {
			t.Errorf("spread(1s, %v) = %v; want %v", tt.r, got, tt.want)
		}
	}
}

// TestNoCallInFlightOnceItsAnswerIsIn: the prober makes no call while one
// is still waiting for its reply. A call whose answer the caller already
// has is not waiting: a probe that follows it at once must not be
// refused for it, however late its goroutine runs on a busy machine.
func TestNoCallInFlightOnceItsAnswerIsIn(t *testing.T) {
	t.Parallel()
	_, rdb := server(t)
	b := newBudget(t, rdb, "inflight-answered", 20, 0, Options{FlushInterval: time.Hour, CallTimeout: patient})
	ctx := context.Background()
	for i := range 200 {
		if _, err := b.send(ctx, scriptCall{nonce: b.nonces.next()}, 0); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if n := b.inflight.Load(); n != 0 {
			t.Fatalf("call %d answered, yet %d call(s) still counted in flight: a probe now would be refused", i, n)
		}
		if _, err := b.Tokens(ctx); err != nil {
			t.Fatalf("Tokens %d: %v", i, err)
		}
		if n := b.inflight.Load(); n != 0 {
			t.Fatalf("Tokens %d answered, yet %d call(s) still counted in flight", i, n)
		}
	}
}
