package redisretry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/redis/go-redis/v9"
)

// A Budget is an httpretry.Budget.
var _ httpretry.Budget = (*Budget)(nil)

func TestNewBudgetBadInput(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	tests := []struct {
		name string
		rdb  redis.UniversalClient
		key  string
		opts []Options
		want string
	}{
		{"nil client", nil, "k", nil, "redisretry: nil Redis client"},
		{"empty key", rdb, "", nil, "redisretry: empty key"},
		{"two Options", rdb, "k", []Options{{}, {}}, "redisretry: 2 Options given; want at most one"},
		{"brace without hash tag", rdb, "a}b", nil, `redisretry: key "a}b" ` + errKeyBrace.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := NewBudget(tt.rdb, tt.key, 20, 0.1, tt.opts...)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("NewBudget error = %v; want %q", err, tt.want)
			}
			if b != nil {
				t.Fatalf("NewBudget returned a Budget with its error")
			}
		})
	}
}

func TestToUnitsMatchesTokenBucket(t *testing.T) {
	t.Parallel()
	// The fixed-point rounding must be httpretry's: a bucket of each
	// capacity, drained, then given 7 deposits, admits the same retries.
	for _, c := range []float64{0, -1, math.NaN(), 0.4999994, 0.9999995, 1, 2.5, 20, 1e6} {
		for _, per := range []float64{0, 0.1, 0.13, 0.0000005, 0.0000004} {
			tb := httpretry.NewTokenBucket(c, per)
			want := int64(math.Round(tb.Tokens() * tokenUnit))
			if got := min(toUnits(c), maxUnits); got != want {
				t.Errorf("toUnits(%v) = %d; TokenBucket holds %d", c, got, want)
			}
		}
	}
	if got := toUnits(1e30); got != maxUnits {
		t.Errorf("toUnits(1e30) = %d; want %d", got, int64(maxUnits))
	}
}

func TestFleetExactness(t *testing.T) {
	_, rdb := server(t)
	const processes = 100
	tests := []struct {
		name string
		per  float64
		n    int // operations per process
	}{
		{"0.1 per operation", 0.1, 30},
		{"0.013 per operation", 0.013, 33}, // 42.9 tokens: the floor counts
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := "exact:" + tt.name
			budgets := make([]*Budget, processes)
			for i := range budgets {
				// The test is about arithmetic, not speed: a call never
				// times out into the local bucket here.
				budgets[i] = newBudget(t, rdb, key, 20, tt.per, Options{CallTimeout: patient})
			}
			// The bucket starts full: drain it before any deposit, so
			// that no deposit overflows the capacity.
			var granted atomic.Int64
			granted.Add(int64(drain(t, budgets[0])))
			var wg sync.WaitGroup
			for _, b := range budgets {
				wg.Go(func() {
					for range tt.n {
						b.Deposit()
						for b.Withdraw(context.Background()) {
							granted.Add(1)
						}
					}
				})
			}
			wg.Wait()
			// Each process holds leased tokens and credit until a flush
			// returns them, or while it remembers a refusal, until it
			// closes: Close sends everything. Draining after each keeps
			// the bucket below capacity, which would cut the sum.
			drainer := newBudget(t, rdb, key, 20, tt.per, perCall(Options{CallTimeout: patient}))
			for _, b := range budgets {
				if s := b.State(); s != Shared {
					t.Errorf("state = %v; want shared", s)
				}
				if err := b.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				granted.Add(int64(drain(t, drainer)))
			}
			total := float64(processes*tt.n) * tt.per
			want := 20 + int64(math.Floor(total+1e-9))
			if got := granted.Load(); got != want {
				t.Errorf("granted %d retries; want 20 + floor(%d·%v) = %d", got, processes*tt.n, tt.per, want)
			}
			// What is left is the exact remainder, in millionths.
			wantLeft := float64(toUnits(total)%tokenUnit) / tokenUnit
			if got := tokens(t, drainer); got != wantLeft {
				t.Errorf("tokens left = %v; want %v", got, wantLeft)
			}
		})
	}
}

func TestDepositMakesNoCall(t *testing.T) {
	t.Parallel()
	_, rdb := server(t)
	var c counter
	rdb.AddHook(&c)
	b := newBudget(t, rdb, "deposit", 20, 0.1, perCall(Options{FlushInterval: time.Hour, CallTimeout: patient}))
	if got := drain(t, b); got != 20 {
		t.Fatalf("drained %d; want 20", got)
	}
	before := c.n.Load()
	for range 1000 {
		b.Deposit()
	}
	if got := c.n.Load() - before; got != 0 {
		t.Fatalf("1000 deposits made %d Redis calls; want 0", got)
	}
	if err := b.Flush(context.Background()); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if got := c.n.Load() - before; got != 1 {
		t.Fatalf("Flush made %d Redis calls; want 1", got)
	}
	// 1000 deposits of 0.1 make 100 tokens, capped at 20.
	if got := tokens(t, b); got != 20 {
		t.Fatalf("tokens = %v; want 20", got)
	}
	// A Flush with nothing pending makes no call.
	before = c.n.Load()
	if err := b.Flush(context.Background()); err != nil || c.n.Load() != before {
		t.Fatalf("empty Flush: err %v, %d calls; want nil, 0", err, c.n.Load()-before)
	}
}

func TestDepositsFlushedInBackground(t *testing.T) {
	t.Parallel()
	_, rdb := server(t)
	b := newBudget(t, rdb, "background", 20, 0.1, Options{FlushInterval: 10 * time.Millisecond, CallTimeout: patient})
	drain(t, b)
	for range 25 {
		b.Deposit()
	}
	eventually(t, "25 deposits flushed", func() bool { return tokens(t, b) == 2.5 })
}

func TestWithdrawCarriesPendingInOneRoundTrip(t *testing.T) {
	t.Parallel()
	_, rdb := server(t)
	var c counter
	rdb.AddHook(&c)
	b := newBudget(t, rdb, "carry", 20, 0.1, perCall(Options{FlushInterval: time.Hour, CallTimeout: patient}))
	drain(t, b)
	for range 10 {
		b.Deposit()
	}
	before := c.n.Load()
	if !b.Withdraw(context.Background()) {
		t.Fatal("Withdraw after 10 deposits of 0.1 into an empty bucket refused; want granted")
	}
	if got := c.n.Load() - before; got != 1 {
		t.Fatalf("Withdraw made %d Redis calls; want 1", got)
	}
	if got := tokens(t, b); got != 0 {
		t.Fatalf("tokens = %v; want 0", got)
	}
}

func TestRefundReachesRedis(t *testing.T) {
	t.Parallel()
	_, rdb := server(t)
	b := newBudget(t, rdb, "refund", 20, 0.1, Options{FlushInterval: time.Hour, CallTimeout: patient})
	for range 3 {
		b.Withdraw(context.Background())
	}
	if got := tokens(t, b); got != 17 {
		t.Fatalf("tokens after 3 withdrawals = %v; want 17", got)
	}
	b.Refund()
	if err := b.Flush(context.Background()); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if got := tokens(t, b); got != 18 {
		t.Fatalf("tokens after a refund = %v; want 18", got)
	}
	// A pending refund rides with the next Withdraw.
	b.Refund()
	if !b.Withdraw(context.Background()) {
		t.Fatal("Withdraw refused")
	}
	if got := tokens(t, b); got != 18 {
		t.Fatalf("tokens after a refund and a withdrawal = %v; want 18", got)
	}
	// Refunds never lift the bucket above capacity.
	for range 5 {
		b.Refund()
	}
	b.Flush(context.Background())
	if got := tokens(t, b); got != 20 {
		t.Fatalf("tokens after 5 refunds = %v; want 20 (the capacity)", got)
	}
}

func TestRefundFlushedInBackground(t *testing.T) {
	t.Parallel()
	_, rdb := server(t)
	b := newBudget(t, rdb, "refund-bg", 20, 0.1, Options{FlushInterval: 10 * time.Millisecond, CallTimeout: patient})
	drain(t, b)
	b.Refund()
	eventually(t, "a refund flushed", func() bool { return tokens(t, b) == 1 })
}

func TestTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, rdb := server(t)
	b := newBudget(t, rdb, "ttl", 20, 0.1, perCall(Options{CallTimeout: patient}))
	b.Withdraw(ctx)
	ttl, err := rdb.PTTL(ctx, "ttl").Result()
	if err != nil || ttl <= 9*time.Minute || ttl > DefaultTTL {
		t.Fatalf("PTTL = %v, %v; want in (9m, 10m]", ttl, err)
	}
	// Every use refreshes it.
	rdb.PExpire(ctx, "ttl", time.Minute)
	b.Withdraw(ctx)
	if ttl, _ := rdb.PTTL(ctx, "ttl").Result(); ttl <= 9*time.Minute {
		t.Fatalf("PTTL after another Withdraw = %v; want over 9m", ttl)
	}
	// An idle key disappears.
	short := newBudget(t, rdb, "ttl-short", 20, 0.1, Options{TTL: 50 * time.Millisecond, CallTimeout: patient})
	short.Withdraw(ctx)
	if ttl, _ := rdb.PTTL(ctx, "ttl-short").Result(); ttl <= 0 || ttl > 50*time.Millisecond {
		t.Fatalf("PTTL with TTL 50ms = %v; want in (0, 50ms]", ttl)
	}
	eventually(t, "idle key expired", func() bool { return rdb.Exists(ctx, "ttl-short").Val() == 0 })
	// An expired key starts full again.
	if got := tokens(t, short); got != 20 {
		t.Fatalf("tokens of an expired key = %v; want 20", got)
	}
}

// A TTL under a millisecond is sent as 1ms (Redis rejects PX 0) and the
// longest one does not overflow: the budget uses the shared bucket with
// either, and the key lives about as long as asked.
func TestTTLClampedBothWays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, rdb := server(t)
	tiny := newBudget(t, rdb, "ttl-tiny", 20, 0.1, perCall(Options{TTL: 500 * time.Microsecond, CallTimeout: patient}))
	if !tiny.Withdraw(ctx) || tiny.State() != Shared {
		t.Fatalf("Withdraw with TTL 500µs: state %v; want granted from the shared bucket", tiny.State())
	}
	forever := newBudget(t, rdb, "ttl-forever", 20, 0.1, perCall(Options{TTL: time.Duration(math.MaxInt64), CallTimeout: patient}))
	if !forever.Withdraw(ctx) || forever.State() != Shared {
		t.Fatalf("Withdraw with TTL MaxInt64: state %v; want granted from the shared bucket", forever.State())
	}
	// Read as milliseconds: go-redis's Duration of this PTTL overflows.
	if ttl, err := rdb.Do(ctx, "PTTL", "ttl-forever").Int64(); err != nil || ttl < int64(290*365*24*time.Hour/time.Millisecond) {
		t.Fatalf("PTTL with TTL MaxInt64 = %v, %v; want about 292 years", ttl, err)
	}
	if got := tokens(t, forever); got != 19 {
		t.Fatalf("tokens = %v; want 19", got)
	}
}

func TestCloseFlushesAndStops(t *testing.T) {
	t.Parallel()
	_, rdb := server(t)
	var c counter
	rdb.AddHook(&c)
	b, err := NewBudget(rdb, "close", 20, 0.5, Options{FlushInterval: time.Hour, CallTimeout: patient})
	if err != nil {
		t.Fatal(err)
	}
	drain(t, b)
	b.Deposit()
	b.Deposit()
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got, err := rdb.Get(context.Background(), "close").Result(); got != "1000000" || err != nil {
		t.Fatalf("key after Close = %q, %v; want 1000000 (two deposits of 0.5 flushed)", got, err)
	}
	if _, err := b.Tokens(context.Background()); err != errClosed {
		t.Fatalf("Tokens after Close: %v; want %v", err, errClosed)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// After Close the local bucket serves, without Redis calls.
	before := c.n.Load()
	if s := b.State(); s != Local {
		t.Fatalf("state after Close = %v; want local", s)
	}
	if got := drain(t, b); got != 2 {
		t.Fatalf("after Close drained %d; want 2 (the local bucket, 20/10)", got)
	}
	if got := c.n.Load() - before; got != 0 {
		t.Fatalf("after Close: %d Redis calls; want 0", got)
	}
}

func TestStateString(t *testing.T) {
	t.Parallel()
	for s, want := range map[State]string{Shared: "shared", Local: "local"} {
		if got := fmt.Sprint(s); got != want {
			t.Errorf("%d.String() = %q; want %q", s, got, want)
		}
	}
	if !strings.HasPrefix(errClosed.Error(), "redisretry: ") {
		t.Errorf("errClosed = %q; want the package prefix", errClosed)
	}
}

// Flush with a context that has already ended sends nothing and keeps
// the pending counts: the next flush delivers them.
func TestFlushWithEndedContextKeepsCounts(t *testing.T) {
	t.Parallel()
	_, rdb := server(t)
	b := newBudget(t, rdb, "flush-ended", 20, 0.5, perCall(Options{FlushInterval: time.Hour, CallTimeout: patient}))
	drain(t, b)
	b.Deposit()
	b.Deposit()
	b.Refund()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Flush(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("Flush(ended) = %v; want context.Canceled", err)
	}
	if s := b.State(); s != Shared {
		t.Fatalf("state = %v; want shared", s)
	}
	if err := b.Flush(context.Background()); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if got := tokens(t, b); got != 2 {
		t.Fatalf("tokens = %v; want 2 (two deposits of 0.5 and a refund)", got)
	}
}
