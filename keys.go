package httpretry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
)

// IdempotencyKeyHeader is the request header that names a logical operation
// for servers that deduplicate repeated requests (the IETF
// "The Idempotency-Key HTTP Header Field" draft). The Transport sends the
// same value on every attempt of an operation.
const IdempotencyKeyHeader = "Idempotency-Key"

// xIdempotencyKeyHeader is the older spelling net/http also honours.
const xIdempotencyKeyHeader = "X-Idempotency-Key"

// IsIdempotent reports whether repeating req preserves its intended effect,
// so that the Transport may send it again after an ambiguous failure. It is
// the default [Transport.Idempotent].
//
// It holds for GET, HEAD, OPTIONS, TRACE, PUT and DELETE (RFC 9110
// §9.2.2; an empty method means GET), for a request with an
// Idempotency-Key or X-Idempotency-Key header (present in the map, even
// with a nil value) and for one whose context was marked with
// [WithIdempotent]. A key only helps a server that deduplicates by it. The
// Transport also repeats an attempt that provably never left the client,
// or one the server answered "X-Should-Retry: true" (see [IsTransient]).
func IsIdempotent(req *http.Request) bool {
	if req == nil {
		return false
	}
	return idempotentUnkeyed(req) || hasIdempotencyKey(req.Header)
}

// idempotentUnkeyed reports whether req is safe to repeat by its method, or
// by its context's mark, rather than by an idempotency key.
func idempotentUnkeyed(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions,
		http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return markedIdempotent(req.Context())
}

// AlwaysIdempotent reports that every request is safe to repeat: set it as
// Transport.Idempotent on a client dedicated to an API whose requests all
// are, POSTs included (LLM inference, search, GraphQL queries). A client
// that also sends writes marks its safe requests with [WithIdempotent].
func AlwaysIdempotent(req *http.Request) bool { return req != nil }

// idempotentKey is the context key of WithIdempotent.
type idempotentKey struct{}

// WithIdempotent returns a context that marks the requests made with it as
// safe to repeat, whatever their method: [IsIdempotent] reports true for
// them. Use it for a POST whose repetition has no further effect, such as
// a search or an LLM completion:
//
//	req = req.WithContext(httpretry.WithIdempotent(req.Context()))
//
// Other requests on the same client are not affected.
func WithIdempotent(ctx context.Context) context.Context {
	return context.WithValue(ctx, idempotentKey{}, true)
}

// markedIdempotent reports whether ctx was marked by WithIdempotent.
func markedIdempotent(ctx context.Context) bool {
	return ctx != nil && ctx.Value(idempotentKey{}) != nil
}

// hasIdempotencyKey reports whether h carries an idempotency key, with the
// same rule as net/http: presence in the map is enough.
func hasIdempotencyKey(h http.Header) bool {
	if _, ok := h[IdempotencyKeyHeader]; ok {
		return true
	}
	_, ok := h[xIdempotencyKeyHeader]
	return ok
}

// RandomKey returns a random (version 4) UUID from crypto/rand in its
// 8-4-4-4-12 hexadecimal text form, suitable as an idempotency key:
//
//	client.Transport = &httpretry.Transport{NewIdempotencyKey: httpretry.RandomKey}
func RandomKey() string {
	var u [16]byte
	// crypto/rand.Read never returns an error (Go 1.24 and later).
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 9562 variant
	var buf [36]byte
	hex.Encode(buf[0:8], u[0:4])
	buf[8] = '-'
	hex.Encode(buf[9:13], u[4:6])
	buf[13] = '-'
	hex.Encode(buf[14:18], u[6:8])
	buf[18] = '-'
	hex.Encode(buf[19:23], u[8:10])
	buf[23] = '-'
	hex.Encode(buf[24:], u[10:])
	return string(buf[:])
}
