package redisretry

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
)

// Defaults for the zero values of ThrottleStateOptions' fields.
const (
	DefaultShare             = 1.0 / 24
	DefaultBucket            = throttle.DefaultWindow / 10
	DefaultStateFlush        = 20 * time.Millisecond
	DefaultBroadcastInterval = 60 * time.Millisecond
	DefaultStale             = fleetRing * DefaultBucket
	DefaultStateCallTimeout  = 2 * time.Second
	DefaultMaxDestinations   = 10000
)

// ThrottleStateOptions tune a [ThrottleState]. The zero value is what most
// callers want; every process of a fleet must use the same Bucket.
type ThrottleStateOptions struct {
	// Share is the expected number of Redis commands a process spends
	// per count it makes (a request or an accept), up to twice it while
	// an outage heals: each flush sends a destination's pending counts
	// with probability Share times their number (at most 1), scaled up by
	// its inverse, or drops them, so that the fleet's counts are right on
	// average whatever each process sends. While the fleet's accepts are
	// rare, an accept weighs in that number as many failures as the
	// fleet's last window holds per accept, from 1 to 8: the fleet learns
	// of a heal from its first accepts, not from one in 1/Share of them.
	// Over the fleet that costs at most twice Share a count on average (8
	// times at most, while a process has not yet heard its accepts grow
	// common). 0 (or less, or NaN) means 1/24; values above 1 mean 1,
	// every flush sent.
	Share float64

	// Bucket is the width of the fleet's counts in Redis: one hash field
	// per bucket. 0 (or less) means a tenth of [throttle.DefaultWindow],
	// the width of the throttle's own buckets.
	Bucket time.Duration

	// FlushInterval is how long counts wait in the process, from the
	// first pending one, before they are sent. 0 (or less) means 20ms.
	FlushInterval time.Duration

	// BroadcastInterval is how often the fleet's counts of a destination
	// are read and published to every process: a process that has just
	// sent counts reads and publishes them when it has heard no
	// publication for this long. 0 (or less) means 60ms, one Bucket.
	BroadcastInterval time.Duration

	// Stale is how long a publication is used: past it (Redis away, or
	// nobody in the fleet counting), the process decides on its own
	// counts alone. Meanwhile its buckets age as the process's own do,
	// and leave the counts a decision reads when they fall out of them.
	// 0 (or less) means as far back as a publication reaches: 50
	// Buckets, 3s.
	Stale time.Duration

	// CallTimeout bounds each round trip to Redis; no caller of the
	// throttle ever waits for one, so it may be patient. 0 (or less)
	// means 2s.
	CallTimeout time.Duration

	// TTL is how long a destination's counts stay in Redis after they
	// were last published. 0 (or less) means ten seconds.
	TTL time.Duration

	// MaxDestinations bounds the destinations whose counts and
	// publications a process keeps. At the bound, those quiet for Stale
	// (nothing heard, sent or pending) are forgotten, at most once per
	// Stale, to make room; while none is, further ones are ignored. 0 (or
	// less) means 10,000.
	MaxDestinations int

	// Clock tells the time of publications. If nil, the system clock.
	Clock clockwork.Clock

	// Rand draws a number in [0, 1) for each flush of a destination. If
	// nil, math/rand/v2's Float64.
	Rand func() float64

	// Logger, if set, receives one record each time Redis fails after
	// answering, and each time it answers again after failing.
	Logger *slog.Logger
}

// ThrottleState is a [throttle.Shared] kept in Redis: the processes of a
// fleet that set it as their Throttle's Shared decide on the fleet's
// counts of each destination, so that a thousand processes that each
// send one request a second to a dependency refuse during its outage,
// and admit again after it heals, as one process sending a thousand a
// second would.
//
// Only destinations that signalled overload lately, here or in the
// fleet, cost anything: a healthy fleet makes no Redis command. While a
// destination is hot, each process counts its requests and accepts in
// memory and, every FlushInterval, sends a random Share of them, scaled
// up, with one HINCRBY on the destination's hash (one field per Bucket);
// accepts are sent more often while they are rare in the fleet's counts
// (see Share).
// The process that sends counts and has heard no publication for
// BroadcastInterval reads the fleet's newest buckets (HMGET), keeps the
// hash alive (PEXPIRE) and now and then drops its old buckets (HDEL),
// and publishes them (PUBLISH) on the destination's channel; every
// process hears it on one pattern subscription and decides on its own
// counts plus the fleet's without them. So the commands of a fleet grow
// with its counts times Share, plus a few per BroadcastInterval per hot
// destination, not with its number of processes.
//
// Nothing on a caller's path waits for Redis: the throttle's calls lock
// a mutex and read memory. When Redis fails or is slow, counts are
// dropped, publications stop, and after Stale each process decides on
// its own counts, as without a Shared; the subscription is dialled
// again with backoff from 100ms to 5s.
//
// Create one per process with [NewThrottleState], set it as
// [throttle.Throttle].Shared, and Close it on shutdown. A ThrottleState
// is safe for simultaneous use by multiple goroutines.
type ThrottleState struct {
	rdb    redis.UniversalClient
	prefix string
	opts   ThrottleStateOptions

	dests  sync.Map     // destination key → *fleetDest; read on every decision, without a lock
	ndests atomic.Int64 // destinations in dests
	swept  atomic.Int64 // when forgetQuiet last swept dests, in Unix nanoseconds
	mu     sync.Mutex   // protects dirty
	dirty  map[*fleetDest]struct{}

	wake   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	failed atomic.Bool                  // the last round trip failed
	ps     atomic.Pointer[redis.PubSub] // the subscription, closed by Close to end a wait on it
}

// NewThrottleState returns a ThrottleState whose keys and channels start
// with prefix, and starts its flusher and its subscription. It makes no
// Redis call itself. Processes that share prefix share their counts.
func NewThrottleState(rdb redis.UniversalClient, prefix string, opts ThrottleStateOptions) (*ThrottleState, error) {
	if rdb == nil {
		return nil, errors.New("redisretry: NewThrottleState: nil Redis client")
	}
	if prefix == "" {
		return nil, errors.New("redisretry: NewThrottleState: empty prefix")
	}
	s := &ThrottleState{
		rdb: rdb, prefix: prefix, opts: opts.resolved(),
		dirty: map[*fleetDest]struct{}{},
		wake:  make(chan struct{}, 1),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Go(s.flushLoop)
	s.wg.Go(s.listen)
	return s, nil
}

// resolved returns o with its defaults filled in.
func (o ThrottleStateOptions) resolved() ThrottleStateOptions {
	if !(o.Share > 0) {
		o.Share = DefaultShare
	}
	o.Share = min(o.Share, 1)
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.Bucket, DefaultBucket)
	def(&o.FlushInterval, DefaultStateFlush)
	def(&o.BroadcastInterval, DefaultBroadcastInterval)
	def(&o.Stale, DefaultStale)
	def(&o.CallTimeout, DefaultStateCallTimeout)
	def(&o.TTL, 10*time.Second)
	if o.MaxDestinations <= 0 {
		o.MaxDestinations = DefaultMaxDestinations
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	return o
}

// Close stops the flusher and the subscription; counts not yet sent are
// dropped. Later calls do nothing.
func (s *ThrottleState) Close() error {
	s.cancel()
	if ps := s.ps.Load(); ps != nil {
		ps.Close()
	}
	s.wg.Wait()
	return nil
}

// dest returns key's state, creating it when create is set and the bound
// allows; nil otherwise.
func (s *ThrottleState) dest(key string, create bool) *fleetDest {
	if d, ok := s.dests.Load(key); ok {
		return d.(*fleetDest)
	}
	if !create || (s.ndests.Load() >= int64(s.opts.MaxDestinations) && !s.forgetQuiet()) {
		return nil
	}
	d, loaded := s.dests.LoadOrStore(key, &fleetDest{name: s.prefix + "{" + key + "}"})
	if !loaded {
		s.ndests.Add(1)
	}
	return d.(*fleetDest)
}

// forgetQuiet makes room under MaxDestinations, once per Stale at most:
// it forgets the destinations quiet for Stale (see fleetDest.quiet) with
// no counts waiting for a flush, and reports whether there is room now.
// So the bound holds the destinations in use, not the first ones a
// long-lived process heard of.
func (s *ThrottleState) forgetQuiet() bool {
	now := s.opts.Clock.Now()
	last := s.swept.Load()
	if now.UnixNano()-last < int64(s.opts.Stale) || !s.swept.CompareAndSwap(last, now.UnixNano()) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dests.Range(func(k, v any) bool {
		d := v.(*fleetDest)
		if _, dirty := s.dirty[d]; !dirty && d.quiet(now, s.opts.Stale) {
			s.dests.Delete(k)
			s.ndests.Add(-1)
		}
		return true
	})
	return s.ndests.Load() < int64(s.opts.MaxDestinations)
}

// Add counts requests and accepts of key at now, to be sent with the
// next flush; after Close it does nothing. It implements
// [throttle.Shared].
func (s *ThrottleState) Add(key string, now time.Time, requests, accepts float64) {
	if s.ctx.Err() != nil {
		// Closed: nothing would send the counts.
		return
	}
	d := s.dest(key, true)
	if d == nil {
		return
	}
	d.add(bucketOf(now, s.opts.Bucket), requests, accepts)
	s.mu.Lock()
	_, was := s.dirty[d]
	s.dirty[d] = struct{}{}
	s.mu.Unlock()
	if !was {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// Hot reports whether the last publication of key's counts, not older
// than Stale, held a request not accepted. It implements
// [throttle.Shared].
func (s *ThrottleState) Hot(key string) bool {
	d := s.dest(key, false)
	return d != nil && d.hotUntil.Load() > s.opts.Clock.Now().UnixNano()
}

// Counts adds the fleet's counts of key, without this process's own, by
// age. It implements [throttle.Shared].
func (s *ThrottleState) Counts(key string, now time.Time, width time.Duration, requests, accepts []float64) {
	if d := s.dest(key, false); d != nil {
		d.counts(now, s.opts.Bucket, width, s.opts.Stale, requests, accepts)
	}
}

var _ throttle.Shared = (*ThrottleState)(nil)

// bucketOf is the number of the bucket of width that holds t.
func bucketOf(t time.Time, width time.Duration) int64 {
	return t.UnixNano() / int64(width)
}
