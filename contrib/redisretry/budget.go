// Package redisretry keeps one httpretry retry budget for a whole fleet
// of client processes in Redis, so that the fleet's retries during an
// outage are bounded by one bucket rather than one bucket per process.
//
//	b, err := redisretry.NewBudget(rdb, "retry-budget:payments", 20, 0.1)
//	if err != nil { … }
//	defer b.Close()
//	client.Transport = &httpretry.Transport{Base: client.Transport, Budget: b}
//
// The success path makes no Redis call: deposits are counted in memory
// and sent in batches. A retry costs at most one round trip (a Lua script
// that adds the pending deposits and takes tokens), and usually none
// during an outage: a refusal is remembered for a short time and a grant
// leases several tokens (see lease.go and [Options.RefusalMemory]). When
// Redis fails or is slow, the budget falls back to a local bucket and goes
// back when Redis answers again.
package redisretry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/redis/go-redis/v9"
)

// Defaults for the zero values of Options' fields.
const (
	DefaultFleetSize        = 10
	DefaultCallTimeout      = 50 * time.Millisecond
	DefaultTTL              = 10 * time.Minute
	DefaultFlushInterval    = 100 * time.Millisecond
	DefaultMaxProbeInterval = 5 * time.Second
)

// Options tune a [Budget]. The zero value is what most callers want.
type Options struct {
	// FleetSize is roughly how many processes share the key. While Redis
	// is unavailable each process falls back to a local bucket of
	// capacity/FleetSize tokens (and the same perRequest), so that the
	// fleet's burst stays near capacity. 0 (or negative) means 10.
	FleetSize int

	// CallTimeout bounds each Redis call, within the caller's deadline. A
	// call that takes longer counts as a failure of Redis and switches
	// the budget to its local bucket. 0 (or negative) means 50ms; above
	// [MaxCallTimeout], MaxCallTimeout.
	CallTimeout time.Duration

	// TTL is how long the key lives after its last use; every call
	// refreshes it, so an idle fleet leaves nothing behind. A key that
	// expired starts full again. 0 (or negative) means 10 minutes.
	TTL time.Duration

	// FlushInterval is how often pending deposits and refunds are sent
	// to Redis when no retry has carried them. 0 (or negative) means
	// 100ms.
	FlushInterval time.Duration

	// MaxProbeInterval caps the backoff between probes of an unavailable
	// Redis; probes start at FlushInterval and double. 0 (or negative)
	// means 5s.
	MaxProbeInterval time.Duration

	// RefusalMemory is how long a refusal of the shared bucket (or the
	// grant of its last whole token) is remembered: meanwhile Withdraw
	// refuses without a Redis call. The process's own deposits made
	// meanwhile stay in it as credit until they add up to a whole token,
	// which the next flush sends to Redis; a Withdraw that comes before
	// that flush spends it without a call (see lease.go). Each
	// refusal is remembered for a time drawn between half of it and all
	// of it. 0 means 1s; negative means none (every Withdraw that holds
	// no leased token asks Redis).
	RefusalMemory time.Duration

	// MaxLease is the most tokens one Withdraw takes from Redis: it asks
	// for the bucket's share per process (tokens/FleetSize, as of the
	// last reply), spends one and keeps the rest for the next Withdraws
	// until the next flush returns them. The tokens a process holds
	// beyond its Withdraws' own, leased or asked for by Withdraws in
	// flight, stay within it. 0 means 8; negative means 1 (no lease).
	MaxLease int

	// AllowEviction skips the check of the eviction policy of the Redis
	// server that runs each call (see [ErrBudgetEviction]). Set it only
	// for a Redis that cannot tell its policy (INFO disabled) and never
	// evicts, or to accept that an evicted bucket comes back full. false
	// means every call checks.
	AllowEviction bool

	// OnStateChange, if set, is called once for every change between
	// [Shared] and [Local], never per request. It must not block and must
	// not call the Budget. Calls are serialized.
	OnStateChange func(State)

	// Logger, if set, receives one record per state change, with the
	// key and, on a fall back, the error. If nil, nothing is logged.
	Logger *slog.Logger
}

// Budget is an [httpretry.Budget] kept in Redis under one key, shared by
// every process that uses that key: a token bucket with exactly the
// arithmetic of [httpretry.TokenBucket] (millionths of a token), starting
// full, gaining perRequest per operation and losing one token per retry.
//
// Create one with [NewBudget] per process and key, set it as the Budget of
// the Transports that call the dependency, and Close it on shutdown. The
// usual choice is one key per dependency, so that an outage of one does
// not spend the retries of another. The zero value is not usable.
//
// Deposit and Refund never touch the network: they count in memory, and a
// background goroutine sends the counts every FlushInterval, as does every
// Withdraw that asks Redis, in the same round trip as its tokens. Most
// Withdraws during an outage ask nothing: a refusal is remembered and
// announced to the fleet, deposits wait in the process while the bucket is
// empty, and a grant leases several tokens (see lease.go and announce.go). Deposits made within one
// interval of a crash are lost, which only makes the budget stricter.
// When a Redis call fails or takes longer than CallTimeout, the Budget
// falls back to a local [httpretry.TokenBucket] of capacity/FleetSize
// (created full with the Budget and kept for its life), probes Redis with
// backoff from its background goroutine, and goes back to the shared
// bucket when Redis answers. Deposits and refunds made in the local state
// stay local, and so does the refund of a token the local bucket gave.
// The deposits, refunds and credit a failed call carried are dropped; the
// leased tokens it carried are replayed under its nonce, and so are the
// tokens a call takes after its caller left (see settle.go). A call that
// go-redis sends twice (its reply was lost) applies once.
//
// A Budget is safe for simultaneous use by multiple goroutines.
type Budget struct {
	rdb  redis.UniversalClient
	keys []string // the one key, as scripts take it
	// noncePrefix starts the keys of the nonces, in the key's Cluster slot.
	noncePrefix string
	nonces      *nonces
	capacity    int64 // in tokenUnit
	perRequest  int64 // in tokenUnit
	opts        Options
	local       *httpretry.TokenBucket

	state    atomic.Int32 // a State, or closed
	deposits atomic.Int64 // deposits not yet sent
	refunds  atomic.Int64 // refunds not yet sent

	// The local answers of lease.go.
	now          func() time.Time
	leased       atomic.Int64 // units taken from Redis and not yet spent
	credit       atomic.Int64 // units deposited while the bucket was believed empty
	creditSince  atomic.Int64 // Unix nanoseconds when the credit started, or 0
	lastTokens   atomic.Int64 // units in the bucket after the last Withdraw
	refusedUntil atomic.Int64 // Unix nanoseconds when the remembered refusal ends

	// checked holds the run_id of the server last found not to evict
	// (budget_eviction.go).
	checked string

	// The announcements of announce.go.
	announce   string             // the marker key and the channel
	stopListen context.CancelFunc // ends listen
	listened   chan struct{}      // closed when listen has returned
	heard      atomic.Int64       // announcements received, for tests

	mu sync.Mutex // serializes state changes and their reports

	callMu   sync.Mutex     // protects closed, draining and the Adds of calls and settling
	closed   bool           // no new Redis call starts
	draining bool           // Close waits for settling: only its last flush starts
	calls    sync.WaitGroup // Redis calls in flight, for Close
	settling sync.WaitGroup // script calls not yet settled (settle.go), for Close
	inflight atomic.Int32   // Redis calls in flight, for the prober

	// The calls of flight.go and settle.go.
	flights     flights      // the call in flight of the Withdraws
	asking      atomic.Int64 // Withdraws making or waiting for a call
	asked       atomic.Int64 // tokens reserved beyond one by Withdraws in flight
	unsettledMu sync.Mutex   // protects unsettled
	unsettled   []scriptCall // calls whose answer was lost, for replay

	grantsMu   sync.Mutex    // protects grants, unrecorded, grantEnds and each grant's ended
	grants     []*localGrant // local tokens out for running operations; see refund.go
	unrecorded int64         // local tokens out whose records the bound dropped
	grantEnds  uint64        // operations ended with a record out, so far: ranks their ends

	stop      chan struct{} // closed by Close to stop the flusher
	done      chan struct{} // closed when the flusher has returned
	closeOnce sync.Once
}

// NewBudget returns a [Budget] that keeps its tokens in rdb under key,
// holding at most capacity tokens, gaining perRequest per operation and
// spending one per retry, and starts its background goroutine. Both
// numbers are rounded to the nearest millionth of a token, as
// [httpretry.NewTokenBucket] rounds them; a capacity above 9 billion tokens is
// clamped. opts may hold one [Options]; none means the defaults.
//
// Every process sharing key must use the same capacity and perRequest.
// NewBudget makes no Redis call, so it succeeds while Redis is down; it
// fails only on a nil client, an empty key, a key with a '}' but no hash
// tag (the Budget keeps short-lived keys beside key, in its Redis Cluster
// slot) or more than one Options.
func NewBudget(rdb redis.UniversalClient, key string, capacity, perRequest float64, opts ...Options) (*Budget, error) {
	return openBudget(rdb, key, capacity, perRequest, time.Now, opts...)
}

// openBudget is NewBudget with the clock that times remembered refusals.
func openBudget(rdb redis.UniversalClient, key string, capacity, perRequest float64, now func() time.Time, opts ...Options) (*Budget, error) {
	switch {
	case rdb == nil:
		return nil, errors.New("redisretry: nil Redis client")
	case key == "":
		return nil, errors.New("redisretry: empty key")
	case len(opts) > 1:
		return nil, fmt.Errorf("redisretry: %d Options given; want at most one", len(opts))
	}
	noncePrefix, err := sameSlotPrefix(key)
	if err != nil {
		return nil, fmt.Errorf("redisretry: key %q %w", key, err)
	}
	var o Options
	if len(opts) == 1 {
		o = opts[0]
	}
	b := &Budget{
		rdb:         rdb,
		keys:        []string{key},
		noncePrefix: noncePrefix,
		nonces:      newNonces(),
		capacity:    min(toUnits(capacity), maxUnits),
		perRequest:  toUnits(perRequest),
		opts:        o,
		now:         now,
		announce:    announceKey(noncePrefix),
		checked:     checkedKey(noncePrefix),
		listened:    make(chan struct{}),
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
	}
	b.perRequest = min(b.perRequest, b.capacity)
	b.lastTokens.Store(b.capacity) // a new key is a full bucket
	b.local = httpretry.NewTokenBucket(capacity/float64(b.fleetSize()), perRequest)
	go b.run()
	if b.announceMillis() == 0 {
		b.stopListen = func() {}
		close(b.listened)
	} else {
		var ctx context.Context
		ctx, b.stopListen = context.WithCancel(context.Background())
		go b.listen(ctx)
	}
	return b, nil
}

func (b *Budget) fleetSize() int {
	if b.opts.FleetSize <= 0 {
		return DefaultFleetSize
	}
	return b.opts.FleetSize
}

func (b *Budget) callTimeout() time.Duration {
	return callBound(b.opts.CallTimeout, DefaultCallTimeout)
}

func (b *Budget) ttl() time.Duration { return durationOr(b.opts.TTL, DefaultTTL) }

func (b *Budget) flushInterval() time.Duration {
	return durationOr(b.opts.FlushInterval, DefaultFlushInterval)
}

func (b *Budget) maxProbeInterval() time.Duration {
	return durationOr(b.opts.MaxProbeInterval, DefaultMaxProbeInterval)
}

// ended reports whether ctx is done. It selects on Done rather than
// calling Err, which blocks on a live context of clockwork's fake clock.
func ended(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

func durationOr(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Deposit counts one operation. It makes no Redis call: the count is sent
// with the next Withdraw or flush. In the local state it deposits into the
// local bucket.
func (b *Budget) Deposit() {
	if b.state.Load() != int32(Shared) {
		b.local.Deposit()
		return
	}
	if b.perRequest != 0 {
		b.deposits.Add(1)
	}
}

// Withdraw takes one token for a retry. It spends a leased token, or,
// while a refusal is remembered, refuses or spends a whole token of the
// process's credit, without a Redis call (see lease.go). Otherwise, in
// one Redis round trip, it adds the pending deposits, refunds and credit,
// up to capacity, then takes a lease of whole tokens, at least one, if
// one is left. While the call of another Withdraw of the process is in
// flight it waits for that call instead, which asks for its token too
// (single flight, see flight.go): it waits for at most two calls besides
// its own, each bounded by CallTimeout, and returns by ctx's deadline. If
// Redis fails or does not answer in time it switches to the local bucket
// and withdraws there. A leased token or a whole token of credit is
// spent even when ctx has already ended; otherwise it reports false,
// without a call, when ctx has already ended, and false when ctx ends
// during the call, whose grant is then leased and returned by the next
// flush.
func (b *Budget) Withdraw(ctx context.Context) bool {
	if b.state.Load() != int32(Shared) {
		return b.withdrawLocal(ctx)
	}
	if granted, ok := b.withdrawLocally(); ok {
		return granted
	}
	if ended(ctx) {
		return false
	}
	return b.withdrawShared(ctx)
}

// Refund gives back a token withdrawn for a retry that was not sent, to
// the bucket it came from. In the local state, or while a token withdrawn
// from the local bucket for a running operation is still out (see
// refund.go), it goes to the local bucket; otherwise it is sent to Redis
// with the next Withdraw or flush.
func (b *Budget) Refund() {
	if b.takeGrant() || b.state.Load() != int32(Shared) {
		b.local.Refund()
		return
	}
	b.refunds.Add(1)
}

// Flush sends the pending deposits and refunds to Redis now, with the
// leased tokens not spent, in one round trip, bounded by ctx and
// CallTimeout. While the bucket is believed empty the deposits stay in the
// process as credit instead, up to a whole token or for a bounded time
// (see lease.go). The background goroutine flushes every
// FlushInterval; tests and shutdown paths call Flush directly. It does
// nothing in the local state. With ctx already ended it sends nothing,
// keeps the counts for the next flush and returns ctx's error. It first
// replays the calls whose answer was lost (settle.go). A failure switches
// to the local bucket and is returned; the deposits, refunds and credit it
// carried are dropped, and the leased tokens kept for the next flush or
// probe. A call go-redis sent twice (see nonce.go) applied them once, and
// Flush returns nil.
func (b *Budget) Flush(ctx context.Context) error {
	if b.state.Load() != int32(Shared) {
		return nil
	}
	if ended(ctx) {
		// Nothing is sent, so the counts stay for the next flush.
		return ctx.Err()
	}
	return b.flush(ctx, false)
}

// flush is Flush; with all, it sends the credit whatever holdCredit says,
// as Close does, whose last flush it is. It first replays the calls whose
// answer was lost (settle.go).
func (b *Budget) flush(ctx context.Context, all bool) error {
	if _, err := b.replay(ctx, all); err != nil {
		if !ended(ctx) {
			b.fallBack(err)
		}
		return err
	}
	leased, credit := b.takeHeld(all)
	add := min(leased+credit+b.takePending(), b.capacity)
	if add == 0 {
		return nil
	}
	c := scriptCall{nonce: b.nonces.next(), add: add, keep: min(leased, add), final: all}
	_, err := b.send(ctx, c, 0)
	if err != nil && !ended(ctx) {
		b.fallBack(err)
	}
	return err
}

// Tokens reads the number of tokens in the shared bucket, for metrics and
// tests: capacity if the key does not exist. Pending deposits are not
// included. It reads Redis whatever the state, bounded by ctx and
// CallTimeout, and changes no state; after Close it returns an error.
func (b *Budget) Tokens(ctx context.Context) (float64, error) {
	units, err := do(b, ctx, func(ctx context.Context) (int64, error) {
		v, err := b.rdb.Get(ctx, b.keys[0]).Int64()
		if errors.Is(err, redis.Nil) {
			return b.capacity, nil
		}
		return v, err
	})
	if err != nil {
		return 0, b.wrap(err)
	}
	return float64(units) / tokenUnit, nil
}

// State reports whether the Budget uses the shared bucket now. After
// Close it reports [Local].
func (b *Budget) State() State {
	if b.state.Load() == int32(Shared) {
		return Shared
	}
	return Local
}

// Close stops the background goroutine and the subscription, waits for
// the Redis calls in flight to settle (each within CallTimeout of its
// start on a client with ContextTimeoutEnabled, and by its ReadTimeout
// otherwise), so that the tokens they lease are returned, then sends the
// pending deposits and refunds, the credit and the leased tokens not
// spent, bounded by CallTimeout, and waits for the calls left running. It
// does not close rdb. Once Close has begun the Budget uses only its local
// bucket. Close returns the error of the last flush; further calls return
// nil.
func (b *Budget) Close() error {
	var err error
	b.closeOnce.Do(func() {
		close(b.stop)
		<-b.done
		b.stopListen()
		<-b.listened
		b.mu.Lock()
		shared := b.state.Swap(stateClosed) == int32(Shared)
		b.mu.Unlock()
		b.callMu.Lock()
		b.draining = true
		b.callMu.Unlock()
		b.settling.Wait()
		if shared {
			ctx, cancel := context.WithTimeout(context.Background(), b.callTimeout())
			err = b.flush(ctx, true)
			cancel()
		}
		b.callMu.Lock()
		b.closed = true
		b.callMu.Unlock()
		b.calls.Wait()
	})
	return err
}

// tokenUnit is one token in millionths, as httpretry.TokenBucket counts.
const tokenUnit = 1_000_000

// maxUnits is the largest count the Lua script keeps exactly: Lua numbers
// are float64, exact for integers up to 2^53.
const maxUnits = 1 << 53

// toUnits converts a token count to millionths of a token exactly as
// httpretry.NewTokenBucket does: NaN and non-positive values are 0, the rest
// rounded to the nearest millionth.
func toUnits(tokens float64) int64 {
	switch {
	case math.IsNaN(tokens) || tokens <= 0:
		return 0
	case tokens >= maxUnits/tokenUnit:
		return maxUnits
	}
	return int64(math.Round(tokens * tokenUnit))
}

// takePending returns the pending deposits and refunds in units, capped
// at capacity (adding more than capacity fills the bucket either way),
// and resets them.
func (b *Budget) takePending() int64 {
	var d, r int64
	if b.deposits.Load() != 0 {
		d = b.deposits.Swap(0)
	}
	if b.refunds.Load() != 0 {
		r = b.refunds.Swap(0)
	}
	return min(times(d, b.perRequest, b.capacity)+times(r, tokenUnit, b.capacity), b.capacity)
}

// times returns n·unit, or limit when that is larger than limit.
func times(n, unit, limit int64) int64 {
	if n <= 0 || unit <= 0 {
		return 0
	}
	if n > limit/unit {
		return limit
	}
	return n * unit
}
