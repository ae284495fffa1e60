package redisretry

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
)

func TestLeaseWant(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		tokens    int64 // units
		fleetSize int
		maxLease  int
		held      int64
		want      int64
	}{
		{"full bucket, one process: up to the bound", 20 * tokenUnit, 1, 8, 0, 8},
		{"the share per process", 20 * tokenUnit, 10, 8, 0, 2},
		{"a share under one token asks one", 20 * tokenUnit, 100, 8, 0, 1},
		{"empty bucket asks one", 0, 10, 8, 0, 1},
		{"fractions round down", 29*tokenUnit + 999_999, 10, 8, 0, 2},
		{"no lease", 1000 * tokenUnit, 1, 1, 0, 1},
		{"a non-positive bound is one", 1000 * tokenUnit, 1, -3, 0, 1},
		{"a non-positive fleet is one process", 5 * tokenUnit, 0, 8, 0, 5},
		{"the largest bucket", math.MaxInt64, 1, 8, 0, 8},
		{"leases held count against the bound", 40 * tokenUnit, 1, 8, 3, 5},
		{"a process at the bound asks one", 40 * tokenUnit, 1, 8, 7, 1},
		{"past the bound still one", 40 * tokenUnit, 1, 8, 30, 1},
		{"a share under the room is the share", 40 * tokenUnit, 10, 8, 3, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := leaseWant(tt.tokens, tt.fleetSize, tt.maxLease, tt.held); got != tt.want {
				t.Errorf("leaseWant(%d, %d, %d, %d) = %d; want %d", tt.tokens, tt.fleetSize, tt.maxLease, tt.held, got, tt.want)
			}
		})
	}
}

func TestRefusedBy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		granted, after int64
		want           bool
	}{
		{"refused", 0, 999_999, true},
		{"refused, bucket emptied by others", 0, 0, true},
		{"granted the last whole token", 1, 500_000, true},
		{"granted a lease that emptied the bucket", 3, 0, true},
		{"granted, a whole token left", 1, tokenUnit, false},
		{"granted, plenty left", 4, 16 * tokenUnit, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := refusedBy(tt.granted, tt.after); got != tt.want {
				t.Errorf("refusedBy(%d, %d) = %v; want %v", tt.granted, tt.after, got, tt.want)
			}
		})
	}
}

func TestRefusalEndAndHolds(t *testing.T) {
	t.Parallel()
	const mem = 200 * time.Millisecond
	now := int64(1_000_000_000_000)
	ends := []struct {
		name string
		r    float64
		want time.Duration
	}{
		{"shortest draw: half the memory", 0, mem / 2},
		{"middle draw", 0.5, 3 * mem / 4},
		{"longest draw: just under the memory", 0.999999, mem - 100*time.Nanosecond},
	}
	for _, tt := range ends {
		t.Run(tt.name, func(t *testing.T) {
			if got := time.Duration(refusalEnd(now, mem, tt.r) - now); got != tt.want {
				t.Errorf("refusalEnd - now = %v; want %v", got, tt.want)
			}
		})
	}
	holds := []struct {
		name  string
		until int64
		want  bool
	}{
		{"ends later", now + int64(mem/2), true},
		{"ends a full memory later", now + int64(mem), true},
		{"ends now", now, false},
		{"ended", now - 1, false},
		{"never remembered", 0, false},
		{"the clock went back: ends past the bound", now + int64(mem) + 1, false},
	}
	for _, tt := range holds {
		t.Run(tt.name, func(t *testing.T) {
			if got := refusalHolds(now, tt.until, mem); got != tt.want {
				t.Errorf("refusalHolds(now, now%+d, %v) = %v; want %v", tt.until-now, mem, got, tt.want)
			}
		})
	}
}

// clockedBudget returns a Budget on a fake clock whose client counts its
// commands, and both, closed when t ends.
func clockedBudget(t *testing.T, key string, capacity, perRequest float64, o Options) (*Budget, *clockwork.FakeClock, *counter) {
	t.Helper()
	_, rdb := server(t)
	// A connection set up and the script loaded: what is counted is the
	// Budget's own calls.
	if err := bucketScript.Load(context.Background(), rdb).Err(); err != nil {
		t.Fatal(err)
	}
	c := &counter{}
	rdb.AddHook(c)
	clk := clockwork.NewFakeClock()
	b, err := openBudget(rdb, key, capacity, perRequest, clk.Now, o)
	if err != nil {
		t.Fatalf("openBudget: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	if o.RefusalMemory >= 0 {
		subscribed(t, rdb, b, 1)
	}
	c.calls() // the subscription's, once
	return b, clk, c
}

// subscribed waits until n clients subscribe to b's announcements.
func subscribed(t *testing.T, rdb *redis.Client, b *Budget, n int64) {
	t.Helper()
	eventually(t, "subscribed to the announcements", func() bool {
		got, err := rdb.PubSubShardNumSub(context.Background(), b.announce).Result()
		return err == nil && got[b.announce] == n
	})
}

// calls returns the commands c counted since the last call of calls.
func (c *counter) calls() int64 { return c.n.Swap(0) }

func TestRefusalRememberedForItsMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const mem = time.Second
	b, clk, c := clockedBudget(t, "refusal-memory", 2, 0, Options{FleetSize: 1, RefusalMemory: mem, FlushInterval: time.Hour, CallTimeout: patient})
	if n := drain(t, b); n != 2 {
		t.Fatalf("drained %d; want 2", n)
	}
	// One lease of both tokens, then the refusal is remembered: the grant
	// left less than a token.
	if got := c.calls(); got != 1 {
		t.Fatalf("draining made %d calls; want 1 (the lease)", got)
	}
	// The grant of the last token was announced, and heard: the memory
	// starts again, at the same fake time.
	eventually(t, "the announcement heard", func() bool { return b.heard.Load() == 1 })
	for range 100 {
		if b.Withdraw(ctx) {
			t.Fatal("Withdraw granted from an empty bucket")
		}
	}
	if got := c.calls(); got != 0 {
		t.Fatalf("%d calls while the refusal is remembered; want 0", got)
	}
	// Before the shortest draw ends, still remembered.
	clk.Advance(mem/2 - time.Millisecond)
	if b.Withdraw(ctx) || c.calls() != 0 {
		t.Fatal("the refusal was forgotten before half its memory")
	}
	// After the longest, Redis is asked again, once, and refuses again.
	clk.Advance(mem/2 + time.Millisecond)
	if b.Withdraw(ctx) {
		t.Fatal("Withdraw granted from an empty bucket")
	}
	if b.Withdraw(ctx) {
		t.Fatal("Withdraw granted from an empty bucket")
	}
	if got := c.calls(); got != 1 {
		t.Fatalf("%d calls after the memory ended; want 1", got)
	}
}

func TestCreditPaysOwnRetriesWhileRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const mem = time.Second
	b, clk, c := clockedBudget(t, "credit", 1, 0.1, Options{RefusalMemory: mem, FlushInterval: time.Hour, CallTimeout: patient})
	drain(t, b)
	eventually(t, "the announcement heard", func() bool { return b.heard.Load() == 1 })
	c.calls()
	// Ten deposits while the refusal is remembered are one token of
	// credit: one retry, without a call, and no more.
	for range 10 {
		b.Deposit()
	}
	if !b.Withdraw(ctx) {
		t.Fatal("a whole token of credit refused")
	}
	if b.Withdraw(ctx) {
		t.Fatal("granted past the credit")
	}
	// Five more stay in the process: a flush sends nothing.
	for range 5 {
		b.Deposit()
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.calls(); got != 0 {
		t.Fatalf("%d calls while refused; want 0", got)
	}
	// Once the memory ends the bucket is still believed empty: half a
	// token stays, a whole one goes.
	clk.Advance(mem)
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.calls(); got != 0 {
		t.Fatalf("a flush of half a token into a bucket believed empty made %d calls; want 0", got)
	}
	for range 5 {
		b.Deposit()
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.calls(); got != 1 {
		t.Fatalf("the flush of a whole token made %d calls; want 1", got)
	}
	if got := tokens(t, b); got != 1 {
		t.Fatalf("tokens = %v; want 1: the credit not spent, sent once", got)
	}
	// Now the bucket is known to hold a token: deposits go out again.
	c.calls() // the read of tokens
	b.Deposit()
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.calls(); got != 1 {
		t.Fatalf("a flush with the bucket not empty made %d calls; want 1", got)
	}
}

func TestCreditHeldAtMostMaxCreditHold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, clk, c := clockedBudget(t, "credit-hold", 1, 0.1, Options{RefusalMemory: time.Second, FlushInterval: time.Hour, CallTimeout: patient})
	drain(t, b)
	eventually(t, "the announcement heard", func() bool { return b.heard.Load() == 1 })
	c.calls() // the drain's
	clk.Advance(time.Second)
	b.Deposit()
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(maxCreditHold - time.Millisecond)
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.calls(); got != 0 {
		t.Fatalf("%d calls before maxCreditHold; want 0", got)
	}
	clk.Advance(time.Millisecond)
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.calls(); got != 1 {
		t.Fatalf("%d calls at maxCreditHold; want 1", got)
	}
	if got := tokens(t, b); got != 0.1 {
		t.Fatalf("tokens = %v; want 0.1", got)
	}
}

func TestHoldCredit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                string
		refusing, emptyKnow bool
		credit              int64
		age                 time.Duration
		want                bool
	}{
		{"a refusal remembered holds a young fraction", true, false, tokenUnit - 1, 0, true},
		{"a refusal remembered lets a whole token go", true, false, tokenUnit, 0, false},
		{"a refusal remembered lets an old fraction go", true, false, 1, maxCreditHold, false},
		{"believed empty, a fraction, young", false, true, tokenUnit - 1, 0, true},
		{"believed empty, a whole token goes", false, true, tokenUnit, 0, false},
		{"believed empty, too old", false, true, 1, maxCreditHold, false},
		{"bucket not empty", false, false, 1, 0, false},
		{"the clock went back: the age is unknown and the credit goes", true, true, 1, -time.Nanosecond, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := holdCredit(tt.refusing, tt.emptyKnow, tt.credit, tt.age); got != tt.want {
				t.Errorf("holdCredit(%v, %v, %d, %v) = %v; want %v", tt.refusing, tt.emptyKnow, tt.credit, tt.age, got, tt.want)
			}
		})
	}
}

func TestLeaseSpentOnceAndReturned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, _, c := clockedBudget(t, "lease", 20, 0, Options{FleetSize: 4, MaxLease: 8, FlushInterval: time.Hour, CallTimeout: patient})
	// A full bucket of 20 over a fleet of 4: a lease of 5.
	for i := range 3 {
		if !b.Withdraw(ctx) {
			t.Fatalf("Withdraw %d refused", i)
		}
	}
	if got := c.calls(); got != 1 {
		t.Fatalf("three Withdraws made %d calls; want 1", got)
	}
	if got := tokens(t, b); got != 15 {
		t.Fatalf("tokens = %v; want 15: one lease of 5", got)
	}
	// The flush returns the 2 leased tokens not spent, once.
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := tokens(t, b); got != 17 {
		t.Fatalf("tokens = %v; want 17: 20 less the 3 spent", got)
	}
	// The next lease is the share of what the last reply reported.
	c.calls()
	if !b.Withdraw(ctx) {
		t.Fatal("Withdraw refused")
	}
	if got := tokens(t, b); got != 13 {
		t.Fatalf("tokens = %v; want 13: a lease of 4 (17 tokens over 4 processes, as the flush reported)", got)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got := tokens(t, newBudget(t, b.rdb, "lease", 20, 0, perCall(Options{}))); got != 16 {
		t.Fatalf("tokens after Close = %v; want 16: the 3 leased tokens not spent returned", got)
	}
}

// A Withdraw leasing 3 tokens whose reply is lost after Redis took them:
// the re-sent call answers the same lease and takes nothing more.
func TestLostReplyNeverLeasesTwice(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb, p := lossyClient(t, srv)
	b := newBudget(t, rdb, "redelivery-lease", 6, 0, Options{FleetSize: 2, CallTimeout: patient, FlushInterval: time.Hour})
	p.LoseNext("eval", 1)
	if !b.Withdraw(context.Background()) {
		t.Fatal("Withdraw refused")
	}
	expectLost(t, p, 1)
	if got := tokens(t, b); got != 3 {
		t.Fatalf("tokens = %v; want 3: one lease of 3", got)
	}
	for i := range 2 {
		if !b.Withdraw(context.Background()) {
			t.Fatalf("leased token %d refused", i)
		}
	}
	if got := tokens(t, b); got != 3 {
		t.Fatalf("tokens = %v; want 3: leased tokens spent without Redis", got)
	}
}

var _ redis.Hook = (*counter)(nil)

// One process empties the bucket; the others hear it and refuse without
// asking Redis.
func TestRefusalAnnouncedToTheFleet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, a := server(t)
	b := srv.Client(t)
	c := &counter{}
	b.AddHook(c)
	o := Options{FleetSize: 1, RefusalMemory: time.Minute, FlushInterval: time.Hour, CallTimeout: patient}
	first := newBudget(t, a, "announce", 3, 0, o)
	others := make([]*Budget, 3)
	for i := range others {
		others[i] = newBudget(t, b, "announce", 3, 0, o)
	}
	subscribed(t, a, first, 4)
	c.calls()
	if n := drain(t, first); n != 3 {
		t.Fatalf("drained %d; want 3", n)
	}
	for i, o := range others {
		eventually(t, "the announcement heard", func() bool { return o.heard.Load() == 1 })
		if o.Withdraw(ctx) {
			t.Fatalf("process %d granted a token from an empty bucket", i)
		}
	}
	if got := c.calls(); got != 0 {
		t.Errorf("the other processes made %d calls; want 0: the refusal was announced", got)
	}
	if got := first.heard.Load(); got != 1 {
		t.Errorf("the first process heard %d announcements; want 1", got)
	}
}

// A process that heard an announcement keeps its deposits, as if Redis
// had refused it.
func TestAnnouncementKeepsDepositsInTheProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, a := server(t)
	b := srv.Client(t)
	c := &counter{}
	b.AddHook(c)
	o := Options{FleetSize: 1, RefusalMemory: time.Minute, FlushInterval: time.Hour, CallTimeout: patient}
	first := newBudget(t, a, "announce-credit", 1, 0.1, o)
	other := newBudget(t, b, "announce-credit", 1, 0.1, o)
	subscribed(t, a, first, 2)
	c.calls()
	drain(t, first)
	eventually(t, "the announcement heard", func() bool { return other.heard.Load() == 1 })
	for range 5 {
		other.Deposit()
	}
	if err := other.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.calls(); got != 0 {
		t.Errorf("the flush of half a token after the announcement made %d calls; want 0", got)
	}
}

// On a Redis Cluster the announcement goes through the bucket's slot: the
// script publishes on the sharded channel of the master that holds the
// key, and the other processes, subscribed through their Cluster clients,
// refuse without asking.
func TestRefusalAnnouncedOnACluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cl := redistest.StartCluster(t, 3, 0)
	a, b := cl.Client(t), cl.Client(t)
	c := &counter{}
	b.AddHook(c)
	o := Options{FleetSize: 1, RefusalMemory: time.Minute, FlushInterval: time.Hour, CallTimeout: patient}
	first := newBudget(t, a, "announce-cluster", 2, 0, o)
	other := newBudget(t, b, "announce-cluster", 2, 0, o)
	eventually(t, "both subscribed", func() bool {
		got, err := a.PubSubShardNumSub(ctx, first.announce).Result()
		return err == nil && got[first.announce] == 2
	})
	c.calls()
	if n := drain(t, first); n != 2 {
		t.Fatalf("drained %d; want 2", n)
	}
	eventually(t, "the announcement heard", func() bool { return other.heard.Load() == 1 })
	if other.Withdraw(ctx) {
		t.Fatal("granted a token from an empty bucket")
	}
	if got := c.calls(); got != 0 {
		t.Errorf("the other process made %d calls; want 0", got)
	}
}

// Withdraw's doc: a leased token is spent even when the context has
// already ended, without a Redis call; with no lease left, an ended
// context is refused without a call.
func TestWithdrawWithEndedContextSpendsALeasedTokenWithoutACall(t *testing.T) {
	t.Parallel()
	b, _, c := clockedBudget(t, "lease-ended", 20, 0, Options{FleetSize: 4, MaxLease: 2, FlushInterval: time.Hour, CallTimeout: patient})
	if !b.Withdraw(context.Background()) {
		t.Fatal("Withdraw refused")
	}
	if got := c.calls(); got != 1 {
		t.Fatalf("first Withdraw made %d calls; want 1 (a lease of 2)", got)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if !b.Withdraw(ended) {
		t.Fatal("Withdraw(ended) refused a leased token; want it spent")
	}
	if b.Withdraw(ended) {
		t.Fatal("Withdraw(ended) with no lease left granted; want false")
	}
	if got := c.calls(); got != 0 {
		t.Fatalf("Withdraws with an ended context made %d calls; want 0", got)
	}
}
