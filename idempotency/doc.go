// Package idempotency is the server side of idempotency keys: middleware
// that makes a client's keyed retries of POST and PATCH safe, following
// the IETF "The Idempotency-Key HTTP Header Field" draft.
//
// A client that did not get an answer cannot know whether its request
// was applied. If it sends an Idempotency-Key and the same key on every
// retry (httpretry's Transport does, with NewIdempotencyKey set to
// httpretry.RandomKey), [Handler] runs the operation once and answers
// every retry with the first response:
//
//	store := idempotency.NewMemoryStore(idempotency.MemoryOptions{})
//	mux.Handle("POST /orders", idempotency.Handler(createOrder, store, idempotency.Options{RequireKey: true}))
//
// # What a request with a key gets
//
//   - The first request reserves the key, atomically, and runs the
//     handler. Its response is recorded when the handler returns.
//   - A request with the key while the first still runs: 409 Conflict,
//     "Retry-After: 1".
//   - A request with the key after that: the recorded response, byte for
//     byte, with "Idempotent-Replayed: true"; the handler does not run.
//   - The key with a different request (method, path and query, or body,
//     compared by SHA-256): 422 Unprocessable Content.
//   - The key from another caller: 422 as well, never the first caller's
//     response (see "Callers" below).
//   - No key where [Options.RequireKey] is set: 400; an empty, repeated,
//     malformed or too long key (over 255 characters): 400.
//   - A new key when the store is full of live records: 503 with
//     "Retry-After: 1"; nothing recorded is evicted to make room.
//
// # Callers
//
// Keys never carry one caller's response to another. With
// [Options.KeyScope] set, each scope (the authenticated account, say) has
// keys of its own. Without it, or for a request whose scope is "", a key
// is bound to the credentials of the request that first used it: its
// Authorization header and its TLS client certificate, hashed into the
// request's fingerprint — no credential reaches the store. The same key
// from other credentials is answered 422, so a retry whose token was
// refreshed meanwhile gets 422 too: services whose credentials change
// between retries should set KeyScope to the principal.
//
// The request's host is not compared, so that a retry sent to another
// instance's own address is replayed: a service that tells tenants apart
// by host (subdomains, host patterns) must return the host, or the
// tenant, from KeyScope, or one caller's key reused on two hosts is
// answered with the first host's response.
//
// Services that authenticate some other way — a session cookie, an API-key
// header, mutual TLS ended at a proxy — are not protected by that binding:
// set KeyScope. [Options.IgnoreCredentials] turns the binding off, for a
// service whose keyed operations are not per caller; every caller then
// shares one key space and may be replayed another's response.
//
// Errors are application/problem+json bodies (RFC 9457) with type, title,
// status and detail. Methods other than [Options.Methods] (POST and PATCH
// by default) pass through untouched.
//
// # What is recorded, and for how long
//
// The status, the headers the handler set (as they went out, so the first
// answer and its replays agree) except hop-by-hop fields, Set-Cookie and
// Date, the trailers, and the body, for [Options.ResponseTTL] (24 hours by
// default): then the key is free again. Headers that outer middleware set
// before the Handler ran (a request ID, CORS) are not recorded: a replay
// carries the ones outer layers set for it. 2xx and 4xx responses are
// recorded, except a 409 with Retry-After — "in progress, ask again", as a
// Handler nested inside or an upstream service answers — which is no
// outcome. 408, 429, 499 (Client Closed Request, answered to a client
// that went away) and 5xx are not either: the key is freed and a retry
// runs the handler again, which is right when such a status means nothing
// happened (see [Options.Release] for the risk, and how to record them
// instead). Neither is a body over [Options.MaxResponseBody] (1 MiB by
// default): it is streamed to the client with "Idempotent-Recorded: false"
// ([RecordedHeader]), and the key is freed.
//
// A handler that returns without writing anything — no status, no body; a
// Flush alone writes neither — answers the implicit 200 net/http sends for
// it, and that is recorded like any 200 — unless its request's context had
// ended by then, as when Go handlers return because the client gave up:
// then nothing is recorded, the key is freed and a retry runs it again,
// instead of being replayed an empty 200 for an operation that never
// happened. So a handler whose operation took effect after its client gave
// up must say so — write at least a status — or a retry runs it again. A
// status net/http rejects (below 100 or over 999) panics at WriteHeader,
// as it does without this middleware, and frees the key like any panic.
//
// # Crashes, hangs and fencing
//
// A handler that panics frees its key (the panic goes on to net/http). A
// process that dies cannot, so every reservation carries a lock of
// [Options.LockTTL] (1 minute by default), after which a retry takes the
// key over and runs the handler again. Each reservation gets a fencing
// [Token], greater than any before it for that key; recording a response
// needs the current token, so a stale first owner that finishes late cannot
// overwrite what its successor recorded ([ErrStaleToken]).
//
// # Stores
//
// [NewMemoryStore] serves one process. It keeps every recorded response
// for its whole TTL: when full, it refuses new keys (503) rather than evict
// a response a client may still retry for, unless
// [MemoryOptions.EvictResponses] trades that away. Services with several instances
// need a shared [Store] (Redis, Postgres, DynamoDB): its documentation
// states the atomicity each method needs, and the storetest package checks
// an implementation against it.
//
// # In the service's own database
//
// A store apart from the service's data leaves a window: the handler's
// effect commits, the process dies before the response is recorded, and
// a retry runs the effect again. When the effect is rows in the database
// that holds the records, [TxHandler] closes it: over a [TxStore] (such
// as contrib/pgidempotency's), it runs the handler in a transaction
// ([TxFrom]), records the response in it, commits, and only then sends
// the response. A crash leaves both or neither; a lost COMMIT
// acknowledgement leaves the key locked until its lock expires, never
// released. Outbound calls of a keyed request get a key of their own from
// [DerivedKey], the same on every run of it.
//
// # Observing
//
// [Options.OnEvent] receives an [Event] for everything the Handler does —
// executions, replays, conflicts, mismatches, missing keys, lock
// takeovers — with a [Kind] usable as a metric label, the method and a
// bounded route name. Nothing carries keys, headers or bodies, and the
// package logs nothing.
package idempotency
