package idempotency

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// ErrStaleToken is returned by [Store.Complete] and [Store.Release] when
// the fencing token no longer owns the key's reservation: the lock expired
// and another request took it over, the reservation was released or
// completed already, or the record expired. The caller's response must
// not be recorded.
var ErrStaleToken = errors.New("idempotency: stale fencing token: the reservation belongs to another request")

// ErrStoreFull is returned by a bounded [Store] that cannot take a record
// without evicting a reservation still in progress or a response still
// within its TTL, or a response larger than it can hold at all. The
// Handler answers a Reserve's with 503 and Retry-After, and a Complete's by
// sending the response unrecorded and freeing the key (KindNotRecorded).
var ErrStoreFull = errors.New("idempotency: store full")

// State is what [Store.Reserve] found for a key.
type State int

// The outcomes of [Store.Reserve].
const (
	// StateReserved: the caller now owns the key and must run the
	// operation, then call Complete or Release with the returned token.
	StateReserved State = iota + 1
	// StateInProgress: another request owns the key and its lock has not
	// expired.
	StateInProgress
	// StateCompleted: the key's response was recorded; it is in
	// Reservation.Response.
	StateCompleted
	// StateMismatch: the key is held (in progress or completed) for a
	// different fingerprint: the same key was sent with another payload.
	StateMismatch
)

// String returns the state's name, for test failures and logs.
func (s State) String() string {
	switch s {
	case StateReserved:
		return "reserved"
	case StateInProgress:
		return "in_progress"
	case StateCompleted:
		return "completed"
	case StateMismatch:
		return "mismatch"
	}
	return "invalid"
}

// Token is a fencing token: the proof of owning a reservation. Every
// reservation of a key gets a token greater than every token issued for
// that key before, so that a request whose lock expired and was taken over
// cannot record its response over its successor's. Zero is never a valid
// token.
type Token uint64

// Reservation is the result of [Store.Reserve].
type Reservation struct {
	// State says what Reserve found.
	State State
	// Token proves ownership of the reservation; set only with
	// StateReserved.
	Token Token
	// TookOver reports, with StateReserved, that the key was held by a
	// reservation whose lock had expired, now replaced by this one.
	TookOver bool
	// Response is the recorded response; set only with StateCompleted.
	// The caller may modify it: the store keeps its own copy.
	Response *Response
}

// Response is a recorded response: what a [Handler] replays for a key.
type Response struct {
	// Status is the HTTP status code.
	Status int
	// Header holds the end-to-end headers, without hop-by-hop fields,
	// Set-Cookie, Date or Content-Length, and the trailers, under keys
	// prefixed with [http.TrailerPrefix] ("Trailer:X-Checksum"), as
	// net/http reads them from a handler's header map.
	Header http.Header
	// Body is the complete response body.
	Body []byte
}

// Clone returns a deep copy of r, or nil if r is nil.
func (r *Response) Clone() *Response {
	if r == nil {
		return nil
	}
	c := &Response{Status: r.Status, Header: r.Header.Clone()}
	if r.Body != nil {
		c.Body = append([]byte(nil), r.Body...)
	}
	return c
}

// Size is the number of bytes r holds: its body plus its header names and
// values. Bounded stores count it against their limit.
func (r *Response) Size() int64 {
	if r == nil {
		return 0
	}
	n := int64(len(r.Body))
	for k, vs := range r.Header {
		n += int64(len(k))
		for _, v := range vs {
			n += int64(len(v))
		}
	}
	return n
}

// Store records idempotency keys: their reservations while the operation
// runs, and then their responses. [NewMemoryStore] is one for a single
// process; a store shared by every instance of a service (Redis, Postgres,
// DynamoDB) makes keyed retries safe across instances.
//
// # Contract for implementers
//
// Every method must be atomic with respect to every other call for the
// same key, across all the processes that share the store: two concurrent
// Reserve calls for a free key must never both return StateReserved. The
// package storetest checks an implementation against this contract.
//
// Reserve(key, fingerprint, lockTTL) looks the key up and, in one atomic
// step:
//   - no record (never used, released, or its TTL has passed): creates a
//     reservation that holds fingerprint and a new token, locked until
//     now+lockTTL, and returns StateReserved with the token;
//   - a record whose fingerprint differs from fingerprint: StateMismatch,
//     whatever its state (a key belongs to the first payload that used it);
//   - a reservation whose lock has not expired: StateInProgress;
//   - a reservation whose lock has expired (its owner crashed, hung or
//     panicked without releasing): replaces it by a new reservation with a
//     new token, and returns StateReserved with TookOver set;
//   - a completed record: StateCompleted with a copy of its Response.
//
// Complete(key, token, response, ttl) records response if token is the
// token of the key's current reservation: the record becomes completed,
// kept for ttl, and later Reserve calls replay it. Release(key, token)
// deletes the key's reservation if token is its current token, so that the
// next Reserve runs the operation again. Both return [ErrStaleToken] when
// the token is not the current one (taken over, released, completed or
// expired), and change nothing. Whether the owner of an expired lock that
// no one has taken over yet may still Complete is up to the store.
//
// Tokens must be strictly greater than every token issued before for the
// same key, even after the key's record was released or expired: use a
// counter that outlives the records, such as one store-wide counter
// (Redis INCR, a Postgres sequence) or a per-key counter kept in a
// record that is never deleted while tokens could be outstanding.
//
// Sketches: on Redis, one Lua script per method over a hash per key (state,
// fingerprint, token, lock deadline, response), with SET NX PX (or PEXPIRE)
// for the lock and the response TTL and INCR of a counter key for tokens.
// On Postgres, INSERT … ON CONFLICT DO NOTHING for the reservation, a
// sequence for tokens, and UPDATE … WHERE key = $1 AND token = $2 for
// Complete, Release and takeover (a takeover also checks the lock
// deadline). On DynamoDB, PutItem and UpdateItem with condition expressions
// on the token and the lock deadline, and its TTL attribute for expiry.
//
// Keys arrive already scoped ([Options.KeyScope]: the scope, a NUL byte,
// the key; a scope may hold any bytes) and validated; stores
// must treat keys, fingerprints and responses as opaque data and never log
// them. Errors other than ErrStaleToken and ErrStoreFull are store
// failures: the [Handler] then answers 503 without running the operation
// (Reserve) or leaves the lock to expire (Complete, Release).
type Store interface {
	// Reserve atomically reserves key for the fingerprint, or reports why
	// it cannot. lockTTL is positive.
	Reserve(ctx context.Context, key, fingerprint string, lockTTL time.Duration) (Reservation, error)
	// Complete records resp under key for ttl if token owns the key's
	// reservation; otherwise it returns ErrStaleToken. The store keeps its
	// own copy of resp. ttl is positive.
	Complete(ctx context.Context, key string, token Token, resp *Response, ttl time.Duration) error
	// Release deletes the key's reservation if token owns it; otherwise it
	// returns ErrStaleToken.
	Release(ctx context.Context, key string, token Token) error
}
