// Package httpretry gives any [http.Client] bounded, safe retries with one
// assignment:
//
//	client.Transport = &httpretry.Transport{Base: client.Transport}
//
// A [Transport] repeats a request only when repetition is safe (an
// idempotent method, or an idempotency key reused on every attempt) and the
// failure is one another attempt could resolve. It keeps every attempt and
// every wait inside one deadline, spaces attempts with capped exponential
// backoff and full jitter, honours Retry-After as a minimum, rewinds request
// bodies, drains and closes the responses it discards, and limits retries
// across operations with a [Budget].
package httpretry

import (
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/httpretry/httpretry/internal/desttable"
	"github.com/httpretry/httpretry/internal/latency"
	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// Defaults for the zero values of Transport's fields.
const (
	DefaultMaxAttempts    = 3
	DefaultMinAttemptTime = 100 * time.Millisecond
	DefaultBaseDelay      = 100 * time.Millisecond
	DefaultMaxDelay       = 5 * time.Second
	DefaultMaxRetryAfter  = 30 * time.Second
	DefaultBufferRequest  = 1 << 20 // 1 MiB

	// DefaultBudgetCapacity and DefaultBudgetPerRequest size the budget a
	// Transport with a nil Budget creates for itself:
	// NewTokenBucket(DefaultBudgetCapacity, DefaultBudgetPerRequest).
	DefaultBudgetCapacity   = 20
	DefaultBudgetPerRequest = 0.1
)

// Transport is an [http.RoundTripper] that retries transient failures of
// requests that are safe to repeat, within one deadline for the whole
// operation.
//
// The zero value is ready to use: three attempts in all, backoff windows
// from 100ms doubling up to 5s with full jitter, Retry-After honoured up to
// 30s, a retry budget of 20 tokens plus 0.1 per operation, and its own
// pooled [http.Transport] as Base. Most callers wrap the transport they
// already have and set a Timeout:
//
//	client.Transport = &httpretry.Transport{Base: client.Transport, Timeout: 2 * time.Second}
//
// Attempts count the first one: MaxAttempts 3 is one attempt and at most
// two retries. Only one layer should retry a given call; if Base (or the
// service behind it) retries too, the attempts multiply.
//
// The hooks that see a request (OnAttemptStart, OnAttempt, OnWait,
// OnDone) get the caller's, which they must not modify; Transient gets
// an attempt's response or error. The hooks of one operation are never
// called concurrently. They run on the goroutine of RoundTrip, except in
// a hedged operation whose hedge timer fired: the timer's goroutine
// starts the hedge (sent on a goroutine of its own) and runs the
// operation from then on, the hedge's OnAttemptStart included, while
// RoundTrip's goroutine waits for it. They have returned when RoundTrip
// returns, but with Hedging.FinishLosers Transient judges a loser that
// answered later, on a goroutine of its own. Logger gets the records
// its field lists, and LogRoute is called once per record. A hook that
// panics ends the operation as a return would (every response it holds
// closed, every attempt ended, what was taken for an attempt not yet sent
// given back to the budget and the quota), and RoundTrip raises the panic
// again.
//
// A Transport is safe for concurrent use by multiple goroutines. Its fields
// must not be changed after its first use, and it must not be copied after
// its first use.
type Transport struct {
	// Base sends each attempt. If nil, the Transport creates one
	// [cleanhttp.DefaultPooledTransport] on first use and keeps it.
	Base http.RoundTripper

	// MaxAttempts is the total number of attempts, including the first.
	// 0 (or a negative value) means 3; 1 disables retries.
	MaxAttempts int

	// Timeout bounds the whole operation, every attempt and wait and the
	// reading of the returned body, as http.Client.Timeout does; the earlier
	// of it and the request context's deadline wins. 0 (or negative) means the
	// context alone.
	Timeout time.Duration

	// AttemptTimeout bounds each attempt, through the end of its response
	// body. An attempt that runs out of time is transient. 0 (or negative)
	// means no per-attempt bound.
	AttemptTimeout time.Duration

	// MinAttemptTime is the least time that must be left, after its wait,
	// for a retry to start; the first attempt always runs. 0 (or negative)
	// means 100ms.
	MinAttemptTime time.Duration

	// BaseDelay is the backoff window of the first retry, doubling per
	// retry up to MaxDelay. 0 (or negative) means 100ms.
	BaseDelay time.Duration

	// MaxDelay caps every backoff window, never a server's Retry-After.
	// 0 (or negative) means 5s.
	MaxDelay time.Duration

	// MaxRetryAfter is the longest Retry-After honoured; a longer one stops
	// the operation with [RetryAfterTooLong]. 0 (or negative) means 30s.
	MaxRetryAfter time.Duration

	// BufferRequest is the largest body of known length without GetBody
	// that is read into memory so that it can be sent again. 0 means 1 MiB;
	// a negative value disables buffering.
	BufferRequest int64

	// BufferResponse, when positive, makes an attempt of a request that is
	// safe to repeat include reading up to this many bytes of its response
	// body, so that a body that fails midway is retried and the caller gets
	// it whole, in memory; a longer body is returned streaming. 0 (or
	// negative) means off. See docs/bodies.md.
	BufferResponse int64

	// IdleTimeout, when positive, fails an attempt when one wait for the
	// server's bytes lasts this long: from the request written to the
	// headers (each 1xx restarts it), then each blocked Read of the body,
	// which fails with an error matching [ErrIdleTimeout]. Time the caller
	// spends not reading never counts: use it for streams, where
	// AttemptTimeout would cap their length. 0 (or negative) means no idle
	// limit. See docs/streams.md.
	IdleTimeout time.Duration

	// Transient reports whether an attempt's failure is worth another
	// attempt. It is called once per attempt that ended with a response or
	// an error of its own (an attempt that lost to a hedge only if it had
	// answered), where the other hooks run (see above). If nil,
	// [IsTransient].
	Transient func(resp *http.Response, err error) bool

	// Idempotent reports whether a request may be repeated after a failure
	// that may have reached the server. It is called once per RoundTrip, and
	// once more when a key is added (NewIdempotencyKey). If nil,
	// [IsIdempotent].
	Idempotent func(req *http.Request) bool

	// NewIdempotencyKey, if set, generates the Idempotency-Key of a request
	// that is not idempotent and carries none, once per operation, sent on
	// every attempt ([RandomKey] will do). If nil, keys are only reused.
	NewIdempotencyKey func() string

	// Budget limits retries across the operations of this Transport. If
	// nil, NewTokenBucket([DefaultBudgetCapacity], [DefaultBudgetPerRequest]),
	// private to this Transport. [Unlimited] disables the limit.
	Budget Budget

	// BudgetPerHost, when set and Budget is nil, gives each host (at most
	// 1024) its own default budget, so that a failing host never refuses the
	// retries of a healthy one.
	BudgetPerHost bool

	// Jitter draws the wait for a backoff window, once per transient
	// failure that may be retried, before the wait is fitted to the
	// deadline (a long draw may then stop the operation); its result is
	// clamped into [0, window]. If nil, [FullJitter].
	Jitter func(window time.Duration) time.Duration

	// Clock is the clock of deadlines and waits. If nil, the real clock.
	Clock clockwork.Clock

	// Logger, if set, receives one record per retry decision, per stop
	// other than [Final], per hedge sent (Info) or refused (Debug), and
	// one for a losing attempt that panicked after RoundTrip returned:
	// method, host, LogRoute's route, attempt, status or
	// error class, wait, time left and reason; never the path, query,
	// userinfo, headers or bodies.
	Logger *slog.Logger

	// LogRoute, if set, names the request's route for Logger's records, as a
	// bounded name ("/users/{id}"), never the path itself. It must not modify
	// req.
	LogRoute func(req *http.Request) string

	// OnAttempt, if set, is called once per attempt, after it ends, with
	// Wait set when another attempt follows; a loser left to finish
	// (Hedging.FinishLosers) is reported, Canceled, as the operation ends.
	OnAttempt func(req *http.Request, a Attempt)

	// OnAttemptStart, if set, is called just before each attempt is sent,
	// with its number (1 for the first); exactly one OnAttempt with the same
	// number follows, unless Base panics.
	OnAttemptStart func(req *http.Request, number int)

	// DialTrace, if set, measures the DNS, connect and TLS phases of new
	// connections for OnAttempt (about ten allocations per attempt that
	// dials); if false, they are zero.
	DialTrace bool

	// OnWait, if set, is called once per wait, when it ends, with the time
	// actually waited: after each OnAttempt that planned another attempt,
	// and before the first attempt when a spent quota was waited for.
	OnWait func(req *http.Request, w Wait)

	// OnDone, if set, is called once per RoundTrip, just before it returns.
	OnDone func(req *http.Request, o Outcome)

	// Propagate, if set, sends the operation's retry state to the next
	// service: each attempt carries [AttemptHeader] and [TimeoutHeader], so
	// that a service behind [DeadlineHandler] bounds its work by the time left
	// and does not retry on its own.
	Propagate bool

	// Hedging, if set, sends another attempt when the first has not answered
	// after a delay; the first answer that ends the operation wins (see
	// [Hedging]). If nil, attempts are sequential.
	Hedging *Hedging

	// LearnAttemptTimeout, if set, derives each attempt's time limit from the
	// latencies observed for its key, within AttemptTimeout (see
	// [LearnedTimeout]).
	LearnAttemptTimeout *LearnedTimeout

	// Throttle, if set, refuses attempts while their destination signals
	// overload (a 429, 503 or 529, a proxy's 502 or 504, Envoy's overload
	// headers, a 5xx with "X-Should-Retry: false", a timeout or a refused
	// connection: docs/overload.md has the list) and new operations while its quota is
	// spent: refused before its first attempt, an operation returns an
	// [*Error] matching [throttle.ErrThrottled]; a refused retry returns the
	// last attempt's result. Both stop with [Throttled]. See docs/overload.md.
	Throttle *throttle.Throttle

	// latencySet holds the latencies recorded for Hedging and
	// LearnAttemptTimeout, created on first use.
	latencySet atomic.Pointer[latency.Set]

	// defaultBase and defaultBudget hold the defaults created on first
	// use when Base or Budget is nil.
	defaultBase   atomic.Pointer[http.Transport]
	defaultBudget atomic.Pointer[TokenBucket]
	hostBudgets   atomic.Pointer[desttable.Table[hostBudget]]
}

// fullJitter is FullJitter, as a variable so that a test can count its
// draws.
var fullJitter = FullJitter

// realClock serves a Transport whose Clock is nil.
var realClock clockwork.Clock = monotonicSince{clockwork.NewRealClock()}

// monotonicSince is a real clock whose Since, as time.Since, reads only the
// monotonic clock, not the wall clock too: on a virtual machine without a
// fast wall clock, that reading costs several times the monotonic one.
type monotonicSince struct{ clockwork.Clock }

func (monotonicSince) Since(t time.Time) time.Duration { return time.Since(t) }

// processStart anchors the start of an attempt read from the monotonic
// clock alone (startClock).
var processStart = time.Now()

// startClock reads when an attempt that needs no wall reading (the
// hedged first attempt sent directly: its start serves its latency and
// the hedge's delay) starts: with t's own Clock, its time (start); on the
// system clock, the monotonic time since processStart (since), start
// left zero and made only when needed (startAt), since time.Now reads the
// wall clock too and a time made from the offset costs more than the
// reading.
func (t *Transport) startClock(clock clockwork.Clock) (start time.Time, since time.Duration) {
	if t.Clock == nil {
		return time.Time{}, time.Since(processStart)
	}
	return clock.Now(), 0
}

// startAt returns the start startClock read (start, since) as a time:
// processStart plus since when start was left zero. Its wall reading
// drifts from the system's when the system clock is stepped, so it serves
// only durations and comparisons with times that carry a monotonic
// reading too (which compare by that), never a time read from a header.
func startAt(start time.Time, since time.Duration) time.Time {
	if start.IsZero() {
		return processStart.Add(since)
	}
	return start
}

// elapsedSince returns the time since the start startClock read (start,
// since) on clock.
func (t *Transport) elapsedSince(clock clockwork.Clock, start time.Time, since time.Duration) time.Duration {
	if start.IsZero() {
		return time.Since(processStart) - since
	}
	return clock.Since(start)
}

func (t *Transport) base() http.RoundTripper {
	if t.Base != nil {
		return t.Base
	}
	return t.defaultBaseOrNew()
}

// defaultBaseOrNew returns the default Base, created on first use. It is
// apart from base so that base, on every request, stays cheap enough to
// inline.
func (t *Transport) defaultBaseOrNew() http.RoundTripper {
	if b := t.defaultBase.Load(); b != nil {
		return b
	}
	// A transport that loses this race has opened no connection yet, so
	// dropping it leaks nothing.
	t.defaultBase.CompareAndSwap(nil, cleanhttp.DefaultPooledTransport())
	return t.defaultBase.Load()
}

// EffectiveBudget returns the budget t's operations use: its Budget, or
// the default one t creates for itself (now, if no operation has yet), for
// metrics to show.
func (t *Transport) EffectiveBudget() Budget { return t.budget() }

// Clone returns a new Transport with t's settings, for code that adds to
// a Transport (an adapter chaining its hooks) without changing one that
// may already be in use. Where t's Base or Budget is nil, the clone shares
// the default t uses (created now if no operation has yet): one
// connection pool and one retry budget for t and its clones, as if they
// were one Transport.
func (t *Transport) Clone() *Transport {
	c := &Transport{
		Base: t.Base, MaxAttempts: t.MaxAttempts, Timeout: t.Timeout,
		AttemptTimeout: t.AttemptTimeout, MinAttemptTime: t.MinAttemptTime,
		BaseDelay: t.BaseDelay, MaxDelay: t.MaxDelay, MaxRetryAfter: t.MaxRetryAfter,
		BufferRequest: t.BufferRequest, BufferResponse: t.BufferResponse,
		IdleTimeout: t.IdleTimeout, Transient: t.Transient, Idempotent: t.Idempotent,
		NewIdempotencyKey: t.NewIdempotencyKey, Budget: t.Budget, Jitter: t.Jitter,
		Clock: t.Clock, Logger: t.Logger, LogRoute: t.LogRoute, OnAttempt: t.OnAttempt,
		OnAttemptStart: t.OnAttemptStart, DialTrace: t.DialTrace, OnWait: t.OnWait, OnDone: t.OnDone,
		Propagate: t.Propagate, Hedging: t.Hedging, LearnAttemptTimeout: t.LearnAttemptTimeout,
		Throttle: t.Throttle, BudgetPerHost: t.BudgetPerHost,
	}
	// The clone learns from, and adds to, t's latencies.
	if s := t.latencies(); s != nil {
		c.latencySet.Store(s)
	}
	if t.Base == nil {
		t.base()
		c.defaultBase.Store(t.defaultBase.Load())
	}
	if t.Budget == nil {
		t.budget()
		c.defaultBudget.Store(t.defaultBudget.Load())
		c.hostBudgets.Store(t.hostBudgetTable())
	}
	return c
}

func (t *Transport) budget() Budget {
	if t.Budget != nil {
		return t.Budget
	}
	if b := t.defaultBudget.Load(); b != nil {
		return b
	}
	t.defaultBudget.CompareAndSwap(nil, NewTokenBucket(DefaultBudgetCapacity, DefaultBudgetPerRequest))
	return t.defaultBudget.Load()
}

func (t *Transport) clock() clockwork.Clock {
	if t.Clock != nil {
		return t.Clock
	}
	return realClock
}

func (t *Transport) maxAttempts() int {
	if t.MaxAttempts <= 0 {
		return DefaultMaxAttempts
	}
	return t.MaxAttempts
}

func (t *Transport) minAttemptTime() time.Duration {
	return durationOr(t.MinAttemptTime, DefaultMinAttemptTime)
}

func (t *Transport) baseDelay() time.Duration { return durationOr(t.BaseDelay, DefaultBaseDelay) }
func (t *Transport) maxDelay() time.Duration  { return durationOr(t.MaxDelay, DefaultMaxDelay) }

// traceLevel is how much of each attempt's connection is measured, when
// a connection trace is installed at all.
func (t *Transport) traceLevel() traceLevel {
	if t.OnAttempt == nil {
		return traceConn
	}
	if t.DialTrace {
		return traceDialed
	}
	return traceTimed
}

func (t *Transport) maxRetryAfter() time.Duration {
	return durationOr(t.MaxRetryAfter, DefaultMaxRetryAfter)
}

func (t *Transport) bufferRequest() int64 {
	if t.BufferRequest == 0 {
		return DefaultBufferRequest
	}
	return t.BufferRequest
}

func (t *Transport) transient(resp *http.Response, err error) bool {
	if t.Transient != nil {
		return t.Transient(resp, err)
	}
	return IsTransient(resp, err)
}

func (t *Transport) idempotent(req *http.Request) bool {
	if t.Idempotent != nil {
		return t.Idempotent(req)
	}
	return IsIdempotent(req)
}

// jitter draws a wait from the window and clamps it into [0, window], so
// that a misbehaving Jitter can neither make a negative wait nor sleep
// past what the deadline checks allowed for.
func (t *Transport) jitter(window time.Duration) time.Duration {
	var d time.Duration
	if t.Jitter != nil {
		d = t.Jitter(window)
	} else {
		d = fullJitter(window)
	}
	return min(max(d, 0), window)
}

// policy resolves the settings the retry decision reads.
func (t *Transport) policy() policy {
	return policy{
		maxAttempts:    t.maxAttempts(),
		minAttemptTime: t.minAttemptTime(),
		maxRetryAfter:  t.maxRetryAfter(),
	}
}

func durationOr(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// RoundTrip sends req, retrying transient failures as the Transport's
// fields allow, and returns the last response or an error.
//
// Whenever an attempt produced a response that ends the operation, even a
// final 503, RoundTrip returns it unread with a nil error, whatever the
// [StopReason]; the responses it did not return were drained and closed.
// Otherwise it returns a [*Error]. RoundTrip never modifies req, and closes
// its body on every path.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	return roundTrip(t, req)
}

// CloseIdleConnections closes the idle connections of Base, when Base has
// that method (as [http.Transport] does), or of the default Base.
func (t *Transport) CloseIdleConnections() {
	type closeIdler interface{ CloseIdleConnections() }
	if t.Base == nil {
		if b := t.defaultBase.Load(); b != nil {
			b.CloseIdleConnections()
		}
		return
	}
	if c, ok := t.Base.(closeIdler); ok {
		c.CloseIdleConnections()
	}
	if h := t.Hedging; h != nil && h.Base != nil && h.Base != t.Base {
		if c, ok := h.Base.(closeIdler); ok {
			c.CloseIdleConnections()
		}
	}
}
