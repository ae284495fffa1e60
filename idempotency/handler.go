package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// ReplayedHeader is the response header that marks a replayed response:
// "Idempotent-Replayed: true".
const ReplayedHeader = "Idempotent-Replayed"

// Defaults for the zero values of Options' fields.
const (
	DefaultLockTTL         = time.Minute
	DefaultResponseTTL     = 24 * time.Hour
	DefaultMaxKeyLength    = 255
	DefaultMaxRequestBody  = 1 << 20 // 1 MiB
	DefaultMaxResponseBody = 1 << 20 // 1 MiB
)

// Options configures [Handler]. The zero value is ready to use: POST and
// PATCH with a key are deduplicated, requests without one pass through,
// locks last a minute and responses a day.
type Options struct {
	// Methods are the methods whose keyed requests are deduplicated; other
	// methods pass through untouched. If empty, POST and PATCH.
	Methods []string

	// RequireKey makes a request of one of Methods without a key fail with
	// 400 and a problem body, without running the handler. If false, such
	// a request runs the handler as if this middleware were absent. Wrap
	// only the operations that require a key when others do not.
	RequireKey bool

	// KeyScope, if set, returns the scope of a request's key, such as the
	// authenticated account: keys are unique within a scope, so that one
	// client can neither replay another's responses nor collide with its
	// keys. The request's host is not part of its fingerprint (a retry may
	// reach another instance by its own address): a service that tells
	// tenants apart by host must make the host part of the scope. The result is combined with the key before the Store sees it
	// (scope, NUL, key). Return the principal, not a credential: a token
	// refreshed between a request and its retry must give the same scope,
	// or the retry runs the operation again.
	//
	// A request for which KeyScope returns "" has no scope, as when
	// KeyScope is nil.
	//
	// If nil, keys share one key space, but a key is bound to the
	// credentials of the request that first used it — its Authorization
	// header and its TLS client certificate, hashed into the fingerprint,
	// never stored — unless IgnoreCredentials is set: the same key from a
	// caller with other credentials is answered 422, and never gets the
	// first caller's response. A caller whose credentials changed between
	// a request and its retry (a refreshed token) gets 422 too: set
	// KeyScope to replay across such changes.
	KeyScope func(r *http.Request) string

	// IgnoreCredentials, if true, stops binding the keys of requests
	// without a scope (KeyScope nil, or returning "") to the request's
	// Authorization header and TLS client certificate.
	//
	// WARNING: every caller then shares one key space, and a caller who
	// sends another's key with the same request gets the other's recorded
	// response — its body and headers. Set it only for a service whose
	// keyed operations are not per caller, or that authenticates in a way
	// this package cannot see (a cookie, an API-key header, mTLS ended at
	// a proxy) — and then prefer setting KeyScope to the authenticated
	// principal instead.
	IgnoreCredentials bool

	// MaxKeyLength is the longest key accepted, in characters; a longer
	// one is answered 400. 0 (or negative) means 255.
	MaxKeyLength int

	// MaxRequestBody is the largest request body accepted with a key: the
	// body is read into memory to be fingerprinted before the handler
	// runs. A larger one is answered 413. 0 (or negative) means 1 MiB.
	MaxRequestBody int64

	// MaxResponseBody is the largest response body recorded, and the most
	// a request holds in memory for it. The Handler holds a response back
	// while it is within this size and records it before sending it when
	// the handler returns; a larger body is streamed to the client as the
	// handler writes it, with "Idempotent-Recorded: false" in its headers,
	// and is not recorded: the key is freed. A handler that flushes sends
	// its response at once (see [RecordedHeader]). 0 (or negative) means
	// 1 MiB.
	MaxResponseBody int64

	// LockTTL is how long a request owns its key while the handler runs.
	// After it, a retry may take the key over and run the handler again;
	// the first owner's response is then not recorded (see [Token]). It
	// must exceed the handler's longest run, or slow requests run twice.
	// 0 (or negative) means 1 minute.
	LockTTL time.Duration

	// ResponseTTL is how long a recorded response is replayed. After it,
	// the key is free and a retry runs the handler again. Publish it to
	// clients. 0 (or negative) means 24 hours.
	ResponseTTL time.Duration

	// Release reports whether a response status leaves the key free
	// instead of recorded, so that a retry runs the handler again. If
	// nil, [Retryable]: 408, 429, 499 and every 5xx.
	//
	// Releasing is right when such a status means nothing happened. If
	// the handler can perform its side effect and then answer 5xx (it
	// charged the card, then failed to write the order), a retry performs
	// it again: either make such handlers answer 2xx or 4xx once the
	// effect happened, or record every status with
	// func(int) bool { return false }, and clients see the 5xx replayed.
	Release func(status int) bool

	// ProblemType is the "type" URI of the problem details this Handler
	// answers (400, 409, 413, 422, 503); point it to your documentation
	// of keys and their expiry. If empty, [DefaultProblemType].
	ProblemType string

	// Route, if set, names a request's route for [Event]: a bounded set
	// of names, never the raw path. If nil, the request's ServeMux
	// pattern (empty when the Handler wraps the mux itself).
	Route func(r *http.Request) string

	// OnEvent, if set, is called for everything the Handler does with a
	// keyed request (see [Kind]), synchronously, on the request's
	// goroutine. It must be safe for concurrent use.
	OnEvent func(Event)
}

// StatusClientClosedRequest is 499 Client Closed Request, nginx's status
// for a request whose client went away before the answer; grpc-gateway
// answers a canceled call with it, and Go services when their request's
// context ends.
const StatusClientClosedRequest = 499

// Retryable reports whether a response status invites the client to try
// again: 408 Request Timeout, 429 Too Many Requests, every 5xx, and 499
// Client Closed Request (which its client, gone, never sees: the retry
// must get an answer). It is the default [Options.Release].
func Retryable(status int) bool {
	return status >= 500 || status == http.StatusTooManyRequests || status == http.StatusRequestTimeout ||
		status == StatusClientClosedRequest
}

// handler is the Handler with its options resolved.
type handler struct {
	next            http.Handler
	store           Store
	methods         map[string]bool
	requireKey      bool
	keyScope        func(*http.Request) string
	ignoreCreds     bool
	maxKeyLength    int
	maxRequestBody  int64
	maxResponseBody int64
	lockTTL         time.Duration
	responseTTL     time.Duration
	release         func(int) bool
	problemType     string
	routeOf         func(*http.Request) string
	onEvent         func(Event)
	// tx, when set (TxHandler), runs a reserved request inside a
	// transaction instead of execute.
	tx txExecutor
}

// Handler returns middleware that makes keyed requests to next safe to
// retry, as the IETF Idempotency-Key draft describes. For a request of one
// of [Options.Methods] with a [KeyHeader]:
//
//   - The key is reserved in store atomically before next runs: of any
//     number of concurrent requests with one key, exactly one runs next.
//   - While it runs, the others are answered 409 Conflict with
//     "Retry-After: 1".
//   - When next finishes, its response (status, end-to-end headers except
//     Set-Cookie, and body) is recorded for [Options.ResponseTTL], and
//     only then sent: the response is held in memory until next returns,
//     up to [Options.MaxResponseBody]. Every later request with the key
//     gets it replayed with "Idempotent-Replayed: true", and next does not
//     run.
//   - The same key with a different request — method, target (path and
//     query) or body, compared by a SHA-256 fingerprint — is answered 422,
//     and so is the same key from another caller (other credentials, see
//     [Options.KeyScope]): no caller is replayed another's response.
//   - Only what next set is recorded: its headers as they went out, its
//     trailers, its body; headers outer layers set for the request are
//     left to each request. A next that returns without writing a status
//     or a body (a Flush alone writes neither) answers net/http's
//     implicit 200, which is recorded — unless its request's context had
//     ended (its client gave up): then nothing is recorded, and the key
//     is freed.
//   - 5xx, 408, 429 and 499 responses are not recorded ([Options.Release]), nor
//     a 409 with Retry-After (an inner or upstream idempotency layer's
//     "in progress": ask again), nor bodies over
//     [Options.MaxResponseBody], which are streamed through:
//     the key is freed, a retry runs next again, and the response says
//     "Idempotent-Recorded: false" ([RecordedHeader]).
//   - If next panics (an invalid status passed to WriteHeader panics, as
//     in net/http), the key is freed and the panic continues up the
//     stack unchanged (net/http recovers it, logs it and drops the
//     connection). If the process dies, the key's lock expires after
//     [Options.LockTTL] and a retry takes it over; the fencing [Token]
//     keeps the old owner from recording over the new one.
//
// Errors are application/problem+json (RFC 9457) with type, title, status
// and detail. A missing key passes through unless [Options.RequireKey]; an
// invalid one (empty, over [Options.MaxKeyLength], repeated, malformed) is
// answered 400; a request body over [Options.MaxRequestBody] (or cut by an
// outer [http.MaxBytesReader]), 413; one that fails to read, 400. When
// store fails or is full before next runs, the request is answered 503
// with "Retry-After: 1" and next does not run.
//
// A Handler inside another over the same store (a mux wrapped whole, and
// one route again with RequireKey) passes through the requests the outer
// one runs as owner of their key: they are deduplicated once, with the
// outer one's options. Over another store, it deduplicates them again.
//
// The Handler keeps no state of its own and logs nothing: keys and bodies
// reach only store. It panics if next or store is nil, as
// [http.ServeMux.Handle] does for a nil handler. The returned handler is
// safe for concurrent use; opts must not change after the call.
func Handler(next http.Handler, store Store, opts Options) http.Handler {
	if next == nil || store == nil {
		panic("idempotency: Handler needs a non-nil handler and Store")
	}
	h := &handler{
		next:            next,
		store:           store,
		methods:         map[string]bool{},
		requireKey:      opts.RequireKey,
		keyScope:        opts.KeyScope,
		ignoreCreds:     opts.IgnoreCredentials,
		maxKeyLength:    opts.MaxKeyLength,
		maxRequestBody:  opts.MaxRequestBody,
		maxResponseBody: opts.MaxResponseBody,
		lockTTL:         durationOr(opts.LockTTL, DefaultLockTTL),
		responseTTL:     durationOr(opts.ResponseTTL, DefaultResponseTTL),
		release:         opts.Release,
		problemType:     opts.ProblemType,
		routeOf:         opts.Route,
		onEvent:         opts.OnEvent,
	}
	methods := opts.Methods
	if len(methods) == 0 {
		methods = []string{http.MethodPost, http.MethodPatch}
	}
	for _, m := range methods {
		h.methods[m] = true
	}
	if h.maxKeyLength <= 0 {
		h.maxKeyLength = DefaultMaxKeyLength
	}
	if h.maxRequestBody <= 0 {
		h.maxRequestBody = DefaultMaxRequestBody
	}
	if h.maxResponseBody <= 0 {
		h.maxResponseBody = DefaultMaxResponseBody
	}
	if h.release == nil {
		h.release = Retryable
	}
	if h.problemType == "" {
		h.problemType = DefaultProblemType
	}
	return h
}

func durationOr(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.methods[r.Method] {
		h.next.ServeHTTP(w, r)
		return
	}
	key, err := requestKey(r.Header, h.maxKeyLength)
	switch {
	case errors.Is(err, errNoKey) && !h.requireKey:
		h.next.ServeHTTP(w, r)
		return
	case errors.Is(err, errNoKey):
		h.answer(w, r, KindMissingKey, h.missingKey())
		return
	case err != nil:
		h.answer(w, r, KindInvalidKey, h.invalidKey())
		return
	}
	key, bind := h.storeKey(r, key)
	if h.runByOuter(r, key) {
		h.next.ServeHTTP(w, r)
		return
	}
	body, err := readBody(r, h.maxRequestBody)
	switch {
	case errors.Is(err, errBodyTooLarge):
		h.answer(w, r, KindRequestTooLarge, h.tooLarge())
		return
	case err != nil:
		w.Header().Set("Connection", "close")
		h.answer(w, r, KindRequestUnreadable, h.unreadable())
		return
	}
	res, err := h.store.Reserve(r.Context(), key, fingerprint(r, body, bind), h.lockTTL)
	if err != nil {
		h.answer(w, r, KindStoreError, h.storeUnavailable())
		return
	}
	switch res.State {
	case StateReserved:
		h.run(w, r, body, key, res)
	case StateCompleted:
		h.replay(w, r, res.Response)
	case StateInProgress:
		h.answer(w, r, KindConflict, h.outstanding())
	case StateMismatch:
		h.answer(w, r, KindMismatch, h.keyReused())
	default:
		h.answer(w, r, KindStoreError, h.storeUnavailable())
	}
}

// storeKey returns the key the Store sees for a request's key, and whether
// the request's credentials are bound to it: unless IgnoreCredentials, they
// are whenever the request has no scope — no KeyScope, or a KeyScope that
// returned "" for it.
func (h *handler) storeKey(r *http.Request, key string) (string, bool) {
	if h.keyScope == nil {
		return key, !h.ignoreCreds
	}
	scope := h.keyScope(r)
	return scopedKey(scope, key), scope == "" && !h.ignoreCreds
}

// runByOuter reports whether an outer Handler runs r as the owner of key
// (as the store sees it) in the same store: reserving the key again would
// find it taken, by that Handler. A Handler with a store of its own (a
// shared one inside a local one, say) deduplicates the request again, in
// its store; and a request with another key (one dispatched in process by
// the outer one's handler) is another operation.
func (h *handler) runByOuter(r *http.Request, key string) bool {
	outer, ok := r.Context().Value(executingKey{}).(executing)
	return ok && outer.key == key && sameStore(outer.store, h.store)
}

// sameStore reports whether a and b are the same Store. A store whose type
// cannot be compared (a struct holding a slice) is never the same: the
// comparison's panic is recovered.
func sameStore(a, b Store) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// answer reports an event and answers its problem.
func (h *handler) answer(w http.ResponseWriter, r *http.Request, kind Kind, p problem) {
	h.event(r, kind, p.Status)
	h.writeProblem(w, p)
}

// run runs next as the owner of key: in a transaction for a TxHandler.
func (h *handler) run(w http.ResponseWriter, r *http.Request, body []byte, key string, res Reservation) {
	if h.tx != nil {
		h.tx.execute(h, w, r, body, key, res)
		return
	}
	h.execute(w, r, body, key, res)
}

// execute runs next as the owner of key and records, or releases, the
// outcome.
func (h *handler) execute(w http.ResponseWriter, r *http.Request, body []byte, key string, res Reservation) {
	if res.TookOver {
		h.event(r, KindTakeover, 0)
	}
	rec := &recorder{w: w, limit: h.maxResponseBody, release: h.release, outer: w.Header().Clone()}
	// The outcome is recorded even when the client has gone: a retry
	// must find it.
	ctx := context.WithoutCancel(r.Context())
	finished := false
	defer func() {
		if !finished {
			// next panicked (or called runtime.Goexit): free the key and
			// let the panic go on.
			h.event(r, KindExecuted, 0)
			h.releaseKey(ctx, r, key, res.Token, 0)
		}
	}()
	claim := &Claim{Key: key, Token: res.Token}
	h.next.ServeHTTP(rec, withBody(r, body, executing{store: h.store, key: key, claim: claim}))
	finished = true
	if claim.recorded.Load() || claim.unknown.Load() {
		// next settled the key itself: it recorded its response in its
		// own transaction, or cannot tell whether it did (the lock
		// expires).
		h.event(r, KindExecuted, rec.status)
		rec.implicitStatus()
		rec.finish(claim.recorded.Load())
		return
	}
	abandoned := r.Context().Err() != nil
	if !abandoned {
		// next returned without writing while its client still waits:
		// its answer is the 200 net/http sends for it.
		rec.implicitStatus()
	}

	resp := rec.result(abandoned)
	h.event(r, KindExecuted, rec.status)
	if resp == nil {
		h.releaseKey(ctx, r, key, res.Token, rec.status)
		rec.finish(false)
		return
	}
	err := h.store.Complete(ctx, key, res.Token, resp, h.responseTTL)
	switch {
	case err == nil:
	case errors.Is(err, ErrStaleToken):
		h.event(r, KindFenced, rec.status)
	case errors.Is(err, ErrStoreFull):
		// The store cannot hold this response, but still holds the
		// reservation: free it, so a retry runs next again.
		h.releaseKey(ctx, r, key, res.Token, rec.status)
	default:
		// next ran, and whether the store recorded its response is
		// unknown. The lock expires in its own time: freeing the key now
		// would let the client's retry run next again.
		h.event(r, KindStoreError, rec.status)
	}
	rec.finish(err == nil)
}

// releaseKey frees key after a response that is not recorded.
func (h *handler) releaseKey(ctx context.Context, r *http.Request, key string, token Token, status int) {
	err := h.store.Release(ctx, key, token)
	switch {
	case err == nil:
		h.event(r, KindNotRecorded, status)
	case errors.Is(err, ErrStaleToken):
		h.event(r, KindFenced, status)
	default:
		h.event(r, KindStoreError, status)
	}
}

// replay answers a recorded response.
func (h *handler) replay(w http.ResponseWriter, r *http.Request, resp *Response) {
	if resp == nil || resp.Status < 200 || resp.Status > 999 {
		// A store returned a record no handler could have made.
		h.answer(w, r, KindStoreError, h.storeUnavailable())
		return
	}
	// The recorded fields replace the current request's; what outer
	// layers set for it and next did not record stays.
	hdr := w.Header()
	for k, vs := range resp.Header {
		hdr[k] = vs // resp is the store's copy, ours alone
	}
	hdr.Set(ReplayedHeader, "true")
	if _, ok := hdr["Content-Type"]; !ok {
		// The first answer went out without one (a sniffed type is
		// recorded): keep net/http from sniffing one now.
		hdr["Content-Type"] = nil
	}
	switch {
	case hasTrailers(resp.Header):
		declareTrailers(hdr) // and no Content-Length
	case bodyAllowed(resp.Status):
		hdr.Set("Content-Length", strconv.Itoa(len(resp.Body)))
	}
	h.event(r, KindReplayed, resp.Status)
	w.WriteHeader(resp.Status)
	if bodyAllowed(resp.Status) && r.Method != http.MethodHead {
		_, _ = w.Write(resp.Body)
	}
}

// bodyAllowed reports whether a response with status may have a body
// (RFC 9110 §6.4.1).
func bodyAllowed(status int) bool {
	return status != http.StatusNoContent && status != http.StatusNotModified
}

// errBodyTooLarge reports a request body over MaxRequestBody.
var errBodyTooLarge = errors.New("idempotency: request body too large")

// readBody reads the whole request body, up to limit bytes. A body an
// outer layer cut with [http.MaxBytesReader] is too large as well.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if r.ContentLength > limit {
		return nil, errBodyTooLarge
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	var maxErr *http.MaxBytesError
	switch {
	case errors.As(err, &maxErr):
		return nil, errBodyTooLarge
	case err != nil:
		return nil, err
	case int64(len(b)) > limit:
		return nil, errBodyTooLarge
	}
	return b, nil
}

// executingKey marks, in a request's context, that a Handler runs the
// request as the owner of its key: the value is an executing.
type executingKey struct{}

// executing is what a Handler runs: a key, as the store sees it, in store.
type executing struct {
	store Store
	key   string
	claim *Claim
}

// withBody returns a shallow copy of r whose body reads b again, marked as
// run by a Handler (see executingKey).
func withBody(r *http.Request, b []byte, run executing) *http.Request {
	r2 := r.WithContext(context.WithValue(r.Context(), executingKey{}, run))
	r2.Body = io.NopCloser(bytes.NewReader(b))
	r2.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	r2.ContentLength = int64(len(b))
	return r2
}

// fingerprint identifies what a request asks for: its method, its target
// (escaped path and query) and its body, hashed with SHA-256. Neither the
// method nor an escaped target contains a newline, so the fields cannot
// run into one another. With caller set, it identifies who asks too: the
// Authorization field's values and the TLS client certificate, so that
// the same key from other credentials is a mismatch. Only the hash
// reaches the Store, never a credential. A request with neither has the
// fingerprint it would have without caller.
func fingerprint(r *http.Request, body []byte, caller bool) string {
	bodySum := sha256.Sum256(body)
	sum := sha256.New()
	io.WriteString(sum, r.Method)
	io.WriteString(sum, "\n")
	io.WriteString(sum, r.URL.EscapedPath())
	if r.URL.RawQuery != "" {
		io.WriteString(sum, "?")
		io.WriteString(sum, r.URL.RawQuery)
	}
	io.WriteString(sum, "\n")
	sum.Write(bodySum[:])
	if caller {
		writeCredentials(sum, r)
	}
	return hex.EncodeToString(sum.Sum(nil))
}

// writeCredentials writes what identifies the caller of r to a hash: each
// Authorization value, length-prefixed so that values cannot run into one
// another, and the SHA-256 of the TLS client certificate (the leaf).
func writeCredentials(sum io.Writer, r *http.Request) {
	for _, v := range r.Header.Values("Authorization") {
		fmt.Fprintf(sum, "\nauthorization %d:%s", len(v), v)
	}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		cert := sha256.Sum256(r.TLS.PeerCertificates[0].Raw)
		io.WriteString(sum, "\ncertificate ")
		sum.Write(cert[:])
	}
}
