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

	// Timeout bounds the whole operation: every attempt and every wait.
	// The operation's deadline is the earlier of start+Timeout and the
	// request context's deadline. It also bounds reading the returned
	// response's body, as http.Client.Timeout does. 0 (or negative) means
	// the request context alone bounds the operation.
	Timeout time.Duration

	// AttemptTimeout bounds each attempt, through the end of its response
	// body; an attempt runs under the smaller of AttemptTimeout and the
	// time left. An attempt that runs out of time is transient. 0 (or
	// negative) means no per-attempt bound.
	AttemptTimeout time.Duration

	// MinAttemptTime is the least time that must be left, after its wait,
	// for a retry to start: an attempt with a millisecond left spends the
	// server's capacity without a realistic chance of helping. The first
	// attempt always runs. 0 (or negative) means 100ms.
	MinAttemptTime time.Duration

	// BaseDelay is the backoff window of the first retry; the window
	// doubles for every further retry, up to MaxDelay. 0 (or negative)
	// means 100ms.
	BaseDelay time.Duration

	// MaxDelay caps every backoff window. It does not cap a server's
	// Retry-After. 0 (or negative) means 5s.
	MaxDelay time.Duration

	// MaxRetryAfter is the longest Retry-After the Transport honours; a
	// longer one stops the operation with [RetryAfterTooLong] and returns
	// the response. 0 (or negative) means 30s.
	MaxRetryAfter time.Duration

	// BufferRequest is the largest request body, of known ContentLength
	// and without GetBody, that the Transport reads into memory before the
	// first attempt so that it can send it again. Bodies with GetBody are
	// never copied. 0 means 1 MiB; a negative value disables buffering.
	BufferRequest int64

	// BufferResponse, when positive, makes an attempt of a request that is
	// safe to repeat include reading its response body, up to this many
	// bytes, within the attempt's time limit. A body that fails midway (a
	// reset, an unexpected EOF, the attempt timing out while reading) is
	// then a transient failure and is retried, and the caller receives a
	// response whose Body holds the complete bytes in memory and whose
	// ContentLength is set. A longer body is returned streaming, with the
	// bytes already read put back in front. HEAD requests and 101
	// responses are never buffered. Memory per in-flight request is at most
	// BufferResponse bytes. 0 (or negative) means off: an attempt ends when
	// the response headers arrive.
	BufferResponse int64

	// IdleTimeout, when positive, fails an attempt when its server stays
	// silent for this long while the Transport waits for it on the
	// caller's behalf. Like a read timeout, it bounds how long one
	// blocking wait for bytes lasts; it never counts time in which the
	// caller was not reading. It runs before the response headers, from
	// the moment the request has been written (getting a connection and
	// sending the body are bounded by Timeout and AttemptTimeout, not by
	// it), restarted by each 1xx interim response; and after them only
	// while a Read of the body is blocked. Before RoundTrip returns, such
	// a stall is a transient failure, retried like an attempt timeout;
	// after, the Read fails with an error that matches [ErrIdleTimeout]
	// and whose Timeout method reports true (never [context.Canceled]),
	// and the connection is released. It never cuts a response that keeps
	// flowing, however long, nor one the caller reads slowly: use it for
	// streams (server-sent events, long downloads), where AttemptTimeout
	// would cap the stream's length. 0 (or negative) means no idle limit.
	IdleTimeout time.Duration

	// Transient reports whether an attempt's failure is worth another
	// attempt. It is called once per attempt, when the attempt ends with
	// a response or an error of its own, on the goroutine of RoundTrip;
	// a hedge canceled because another attempt won is judged only when
	// it had an answer by then, and then on the goroutine that settles
	// it. If nil, [IsTransient].
	Transient func(resp *http.Response, err error) bool

	// Idempotent reports whether a request may be repeated after a failure
	// that may have reached the server. It is called once per RoundTrip,
	// and once more when the Transport adds an idempotency key
	// (NewIdempotencyKey). If nil, [IsIdempotent].
	Idempotent func(req *http.Request) bool

	// NewIdempotencyKey, if set, generates an Idempotency-Key for a request
	// that is not idempotent and carries none; the key is generated once
	// per operation and sent on every attempt. [RandomKey] is a good
	// choice, for servers that deduplicate by that header. If nil, keys
	// are never generated, only reused.
	NewIdempotencyKey func() string

	// Budget limits retries across all the operations of this Transport.
	// If nil, the Transport creates NewTokenBucket([DefaultBudgetCapacity],
	// [DefaultBudgetPerRequest]), 20 and 0.1, on first use,
	// private to this Transport. Use [Unlimited] to disable the limit.
	Budget Budget

	// BudgetPerHost, when set and Budget is nil, gives each destination
	// host its own default budget (20 tokens plus 0.1 per operation)
	// instead of one for every host: a failing host then drains its own
	// and never refuses the retries of a healthy one. At most 1024 hosts
	// are kept; one forgotten to make room starts again full. [Transport.EffectiveBudget] still returns the
	// budget the hosts would share. If false, or Budget is set, one
	// budget serves every host.
	BudgetPerHost bool

	// Jitter draws the wait for a backoff window, once per retry decided
	// after a failure the other rules allowed to be retried. A result
	// below 0 or above the window is clamped into [0, window]. If nil,
	// [FullJitter].
	Jitter func(window time.Duration) time.Duration

	// Clock is the clock used for deadlines and waits. If nil, the real
	// clock. Tests set a [clockwork.FakeClock].
	Clock clockwork.Clock

	// Logger, if set, receives one record per retry decision and per stop
	// other than [Final], carrying method, host, the route LogRoute names,
	// attempt, status or error class, wait, time left and reason; never
	// the path, query strings, userinfo, headers or bodies. If nil,
	// nothing is logged.
	Logger *slog.Logger

	// LogRoute, if set, names the request's route for Logger's records:
	// a bounded name such as the path's template ("/users/{id}"), never
	// the path itself, which can carry identifiers and tokens. It is
	// called once per record. It must not modify req. If nil, records
	// carry no route.
	LogRoute func(req *http.Request) string

	// OnAttempt, if set, is called once per attempt, after it ends, with
	// Wait set when another attempt follows. req is the caller's request.
	// It runs on the goroutine of RoundTrip and must not modify req.
	OnAttempt func(req *http.Request, a Attempt)

	// OnAttemptStart, if set, is called just before each attempt is
	// sent, with its number (1 for the initial attempt), so that an
	// attempt that hangs can be seen while it hangs: every call is
	// followed by exactly one call of OnAttempt with the same number,
	// unless Base panics. req is the caller's request. It runs on the
	// goroutine of RoundTrip and must not modify req.
	OnAttemptStart func(req *http.Request, number int)

	// DialTrace, if set, measures the DNS, connect and TLS phases of each
	// new connection for OnAttempt ([Attempt.DNS], [Attempt.Connect],
	// [Attempt.TLSHandshake]). Their hooks run on net/http's dial
	// goroutine, which may outlive the attempt, so an attempt that asks
	// for a connection then gets a trace of its own (about ten
	// allocations) and the phases are measured only when asked for. If
	// false, they are zero; whether the connection was new or reused, the
	// connection wait and the first byte are measured whenever OnAttempt
	// is set.
	DialTrace bool

	// OnWait, if set, is called once per wait of an operation, when the
	// wait ends, with the time actually waited (see [Wait]): once after
	// every OnAttempt that planned another attempt (its Attempt.Wait, as
	// scheduled, may be 0), before that attempt's OnAttemptStart or, when
	// the wait ended the operation, before OnDone; and once before the
	// first attempt when a spent quota was waited for
	// ([Throttle.WaitQuota]). req is the caller's request. It runs on the
	// goroutine of RoundTrip and must not modify req.
	OnWait func(req *http.Request, w Wait)

	// OnDone, if set, is called once per RoundTrip, just before it
	// returns. req is the caller's request; it must not be modified.
	OnDone func(req *http.Request, o Outcome)

	// Propagate, if set, sends the operation's retry state to the next
	// service: each attempt carries [AttemptHeader] (its 1-based number)
	// and [TimeoutHeader] (the time left for this attempt when its
	// request is written, once it has a connection and, over HTTP/2, a
	// stream, in whole milliseconds; absent when the attempt has no
	// bound). A service
	// behind [DeadlineHandler] then bounds its work by that time and does not
	// retry on its own. If false, no header is added.
	Propagate bool

	// Hedging, if set, sends hedged requests: another attempt when the
	// first has not answered after a delay, the first answer that ends
	// the operation winning (see [Hedging]). If nil, attempts are only
	// ever sequential, and the success path is unchanged.
	Hedging *Hedging

	// LearnAttemptTimeout, if set, derives each attempt's time limit from
	// the latencies observed for its key (see [LearnedTimeout]), within
	// AttemptTimeout when that is set. If nil, AttemptTimeout alone
	// bounds attempts.
	LearnAttemptTimeout *LearnedTimeout

	// Throttle, if set, refuses some attempts, first attempts, retries
	// and hedges, while their destination signals overload, and new
	// operations while it says its rate-limit quota is spent; see
	// [throttle.Throttle]. An attempt is an overload signal when it got
	// a 429, 503 or 529, a 5xx with "X-Should-Retry: false", timed out,
	// or met a refused connection; one the caller's own context ended
	// counts for nothing. An operation refused before its first attempt
	// makes none and returns an [*Error] that matches
	// [throttle.ErrThrottled] (and [throttle.ErrQuotaExhausted] when the
	// quota is spent); one whose retry is refused returns its last
	// attempt's result; both stop with [Throttled]. A refused retry takes
	// no budget token. If nil, nothing is refused.
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
var realClock = clockwork.NewRealClock()

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

// EffectiveBudget returns the budget t's operations use: its Budget, or,
// when that is nil, the default budget t creates for itself
// (NewTokenBucket(DefaultBudgetCapacity, DefaultBudgetPerRequest), private
// to t), created now if no operation has
// yet. Metrics read it to show the budget that is actually in force.
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
	switch {
	case t.OnAttempt == nil:
		return traceConn
	case t.DialTrace:
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
