package redisretry

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/httpretry/httpretry/idempotency"
	"github.com/redis/go-redis/v9"
)

// Defaults for the zero values of IdempotencyOptions' fields.
const (
	DefaultIdempotencyCallTimeout = time.Second
	DefaultReservationTTL         = 24 * time.Hour
	// DefaultCompleteTimeout is CompleteTimeout with WaitReplicas set.
	DefaultCompleteTimeout = 30 * time.Second
)

// IdempotencyOptions tune an [IdempotencyStore]. The zero value is what
// most callers want.
type IdempotencyOptions struct {
	// CallTimeout bounds each Redis call, within the caller's deadline,
	// except that a Reserve once sent is waited for until CallTimeout
	// whatever the caller's deadline (an unread reservation would lock its
	// key for the lock TTL), and one unanswered then is abandoned within
	// another CallTimeout, at least 1s (see abandon.go). The Handler records a response under a
	// context without deadline (the client may have gone), so this is what
	// bounds Complete and Release when Redis hangs. go-redis honours it only on a client with
	// ContextTimeoutEnabled; otherwise the client's ReadTimeout (3s by
	// default) bounds each call. 0 (or negative) means 1s; above
	// [MaxCallTimeout], MaxCallTimeout.
	CallTimeout time.Duration

	// ReservationTTL is how long a reservation is kept after its lock
	// expired without its owner completing or releasing it (the process
	// died): until then a retry with the same payload takes it over, and
	// the key belongs to its first payload. It is never shorter than the
	// lock. 0 (or negative) means 24 hours, the Handler's default
	// response TTL.
	ReservationTTL time.Duration

	// MaxResponseSize, when positive, is the largest response recorded,
	// counted as [idempotency.Response.Size] (body plus header names and
	// values); Complete of a larger one returns
	// [idempotency.ErrStoreFull], and the Handler frees the key. 0 (or
	// negative) means no limit here: the store records what the Handler
	// hands it, which its MaxResponseBody bounds.
	MaxResponseSize int64

	// AllowEviction lets the store run on a Redis whose maxmemory-policy
	// is not noeviction. Without it, Reserve fails with an error wrapping
	// [ErrEvictionPolicy] on such a Redis (its script reads the policy of
	// the server that runs it; the Handler answers 503):
	// under memory pressure it may evict a running operation's lock or
	// record, and a retry would run the operation a second time. Set it
	// only where something else keeps Redis from ever evicting (a memory
	// limit far above what the keys can reach), knowing that a double
	// execution is the price of being wrong. false means refuse.
	AllowEviction bool

	// WaitReplicas, when positive, is the number of replicas each master
	// has, and makes Reserve and Complete wait until that many replicas
	// acknowledged their writes (WAIT on the same connection, after the
	// script), for at most WaitTimeout. Set to the replica count, it
	// guarantees that no reservation Reserve returned is lost in a
	// failover, Sentinel or Cluster, switched or killed: the promoted
	// replica has it. A smaller value does not: during a switchover the
	// old primary takes writes for a while with its other replicas
	// attached, which satisfy a smaller WAIT and drop the writes when they
	// resync. So a write on a master that has, or that any master of the
	// store had within the last minute, more replicas than WaitReplicas
	// fails with an error wrapping [ErrReplicasUncounted].
	//
	// A reservation that is not safe so is undone (a fresh key is freed;
	// a take-over gives the key back to the expired reservation, whose
	// owner may still complete it) and Reserve fails with an error
	// wrapping [ErrNotReplicated] (fewer acknowledged in time) or
	// ErrReplicasUncounted: the Handler answers 503 and runs nothing. A
	// Complete fewer replicas acknowledged is recorded on the primary,
	// which replays it, and sent again under the same nonce until
	// CompleteTimeout, so that after a switchover it reaches the
	// promoted replica; if it still fails it returns the
	// error, and a failover to a replica that missed it loses the
	// response (a retry takes the key over once its lock expires there,
	// and runs the operation again).
	// The price is a round trip to every replica on every Reserve and
	// Complete, and while one replica does not answer, every Reserve
	// fails after WaitTimeout. It needs a *redis.Client (a Sentinel
	// failover client is one) or a *redis.ClusterClient:
	// NewIdempotencyStore refuses other clients. 0 (or negative) means no
	// waiting: replication stays asynchronous.
	WaitReplicas int

	// WaitTimeout bounds each wait for replicas. 0 (or negative) means
	// 250ms; it is at most half of CallTimeout, which bounds the script
	// and the wait together.
	WaitTimeout time.Duration

	// CompleteTimeout bounds one Complete, resends included; each send
	// is bounded by CallTimeout. A Complete is sent again, under the same
	// nonce (so it applies once), after a write fewer than WaitReplicas
	// acknowledged and after a send that failed (a primary killed, a
	// connection closed by a switchover, READONLY from an old primary),
	// so that it reaches the replica a failover promotes: that replica
	// holds the reservation, and a Complete that never reaches it lets a
	// retry take the key over once the lock expires there and run the
	// operation a second time. A Sentinel client learns of a switchover
	// only once the sentinels have reconfigured the replicas, and a
	// Cluster client once its slot map is reloaded: seconds. Where a
	// failover must not run an operation twice, set it above the time a
	// failover takes (down-after-milliseconds plus the failover, or
	// cluster-node-timeout plus the election) and below the Handler's
	// LockTTL, since after the lock expires a take-over fences the
	// Complete anyway. The Handler records a response before it answers
	// the client, so the client waits that long, at most, during a
	// failover. 0 (or negative) means [DefaultCompleteTimeout] when
	// WaitReplicas is set: longer than a SENTINEL FAILOVER switchover or
	// a Cluster failover at the default cluster-node-timeout (15s), and
	// shorter than the Handler's default LockTTL (1m); a primary that
	// dies under the default down-after-milliseconds (30s) may take
	// longer. Without WaitReplicas it means CallTimeout, and then only a
	// write too few replicas acknowledged is sent again, not a send that
	// failed. It is never less than CallTimeout, and at most
	// [MaxCallTimeout] (each Complete's nonce lives that long).
	CompleteTimeout time.Duration
}

// IdempotencyStore is an [idempotency.Store] in Redis, shared by every
// instance of a service that uses the same Redis and prefix: a retry that
// reaches another instance is replayed the first response rather than run
// again.
//
// Each key is one hash (state, fingerprint, fencing token and, once
// completed, the response) and, while its operation runs, one lock string
// that expires after the lock TTL on Redis's own clock, both under a hash
// tag of the key's SHA-256: a key's records share a Redis Cluster slot,
// and the keys spread over every master. Reserve, Complete and Release are
// each one Lua script on one key's records, atomic across all the
// processes. A fencing token is the greater of the key's last token plus
// one and the server's clock in microseconds, so it grows for each key
// even after the key's records expired, were released or were lost (see
// fencing.go), with no store-wide counter. A call that go-redis sends
// twice because its reply was lost applies once and answers the same
// both times (see nonce.go). The idempotency key itself is never stored,
// only its SHA-256, and nothing is logged. Records expire by Redis TTLs: a
// response after the Handler's ResponseTTL, an abandoned reservation after
// [IdempotencyOptions.ReservationTTL].
//
// The owner of an expired lock that no one has taken over yet may still
// Complete: its response is recorded as if it had been on time.
//
// Every key the store writes starts with the prefix, so give it a prefix
// of its own, without braces: a hash tag in the prefix puts every key in
// its one slot (which works, on one shard). Records written by versions
// that kept a store-wide counter (prefix + "r:" + digest) are not read:
// see README_IDEMPOTENCY.md before a rolling upgrade. Replication is
// asynchronous: a failover may lose reservations the old primary
// acknowledged, and a retry then runs the operation again, unless
// [IdempotencyOptions.WaitReplicas] makes each reservation wait for every
// replica. Run Redis with persistence and maxmemory-policy noeviction:
// any other policy may evict a running operation's lock or record
// (volatile-ttl evicts the locks first), and a retry would run the
// operation again, so every Reserve's script checks the policy of the
// server that runs it and refuses such a Redis with [ErrEvictionPolicy]
// unless [IdempotencyOptions.AllowEviction] is set (see
// [IdempotencyStore.CheckEvictionPolicy]). A Reserve that gets no answer
// within CallTimeout is abandoned before it returns (see abandon.go): if
// Redis runs it later, it reserves nothing, or its reservation is undone. A Redis out of
// memory makes Reserve fail with an error that matches
// [idempotency.ErrStoreFull]; Complete still records the response of an
// operation that ran, a little over the limit, rather than free a key whose
// retry would run the operation again.
//
// A Redis failure is returned as an error that names the package and the
// operation, never the key: the Handler then answers 503 before running
// the operation, or leaves the lock to expire after it.
//
// Create one with [NewIdempotencyStore]. An IdempotencyStore is safe for
// concurrent use by multiple goroutines; it holds no connection of its
// own, so there is nothing to close but the client.
type IdempotencyStore struct {
	rdb    redis.UniversalClient
	prefix string
	opts   IdempotencyOptions
	nonces *nonces

	// replicas remembers how many replicas each master listed lately
	// (see replicacount.go).
	replicas replicaCounts
}

// NewIdempotencyStore returns a store that keeps its records in rdb under
// keys that start with prefix. opts may hold at most one
// [IdempotencyOptions]. It makes no Redis call; every Reserve checks the
// maxmemory-policy of the server that runs it, and
// [IdempotencyStore.CheckEvictionPolicy] makes that check at start-up.
func NewIdempotencyStore(rdb redis.UniversalClient, prefix string, opts ...IdempotencyOptions) (*IdempotencyStore, error) {
	if rdb == nil {
		return nil, errors.New("redisretry: nil Redis client")
	}
	if prefix == "" {
		return nil, errors.New("redisretry: empty idempotency store prefix")
	}
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	if len(opts) > 1 {
		return nil, fmt.Errorf("redisretry: %d IdempotencyOptions given; want at most one", len(opts))
	}
	s := &IdempotencyStore{rdb: rdb, prefix: prefix, nonces: newNonces()}
	if len(opts) == 1 {
		s.opts = opts[0]
	}
	if s.opts.WaitReplicas > 0 {
		if err := canWait(rdb); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *IdempotencyStore) callTimeout() time.Duration {
	return callBound(s.opts.CallTimeout, DefaultIdempotencyCallTimeout)
}

func (s *IdempotencyStore) reservationTTL(lockTTL time.Duration) time.Duration {
	return max(durationOr(s.opts.ReservationTTL, DefaultReservationTTL), lockTTL)
}

// nonceTTL is how long, in milliseconds, a call remembers its answer.
func (s *IdempotencyStore) nonceTTL() int64 { return nonceTTL(s.callTimeout()) }

// errNonPositiveTTL rejects a TTL that would make a record expire at once.
var errNonPositiveTTL = errors.New("redisretry: idempotency TTL must be positive")

// Reserve implements [idempotency.Store].
func (s *IdempotencyStore) Reserve(ctx context.Context, key, fingerprint string, lockTTL time.Duration) (idempotency.Reservation, error) {
	if lockTTL <= 0 {
		return idempotency.Reservation{}, errNonPositiveTTL
	}
	if ended(ctx) {
		return idempotency.Reservation{}, wrapStoreErr("reserve", ctx.Err())
	}
	// Once sent, the script is waited for until CallTimeout even when ctx
	// ends first: Redis may run it anyway, and a reservation whose answer
	// no one read would lock the key for lockTTL with no one running the
	// operation. Answered, the Handler frees the key of a request that is
	// over (its handler writes nothing). Unanswered within CallTimeout,
	// the call is abandoned (see abandon.go).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.callTimeout())
	defer cancel()
	keys := s.keys(key)
	cmd, acked := s.run(ctx, "reserve", reserveScript, keys, fingerprint,
		millis(lockTTL), millis(s.reservationTTL(lockTTL)), s.nonceTTL(), s.policyCheck())
	res, err := cmd.Slice()
	if err != nil {
		if unanswered(err) {
			s.abandon(keys)
		}
		return idempotency.Reservation{}, wrapStoreErr("reserve", err)
	}
	if err := reserveRefusal(res); err != nil {
		return idempotency.Reservation{}, err
	}
	r, err := parseReservation(res)
	if err != nil {
		return idempotency.Reservation{}, fmt.Errorf("redisretry: idempotency reserve: %w", err)
	}
	if r.State == idempotency.StateReserved && acked != nil {
		// Not on enough replicas: a failover could lose it and let a
		// retry run the operation again. Put back on the primary what it
		// replaced (nothing, or a take-over's expired reservation, whose
		// owner may still be running), and run nothing.
		s.abandon(keys)
		return idempotency.Reservation{}, acked
	}
	return r, nil
}

// Complete implements [idempotency.Store].
func (s *IdempotencyStore) Complete(ctx context.Context, key string, token idempotency.Token, resp *idempotency.Response, ttl time.Duration) error {
	if ttl <= 0 {
		return errNonPositiveTTL
	}
	if resp == nil {
		return errors.New("redisretry: idempotency complete: nil response")
	}
	if limit := s.opts.MaxResponseSize; limit > 0 && resp.Size() > limit {
		return idempotency.ErrStoreFull
	}
	ctx, cancel := context.WithTimeout(ctx, s.completeTimeout())
	defer cancel()
	keys := s.keys(key)
	// One nonce for every send: it must outlive the last of them.
	args := []any{tokenArg(token), millis(ttl), resp.Status, encodeHeader(resp.Header), resp.Body, nonceTTL(s.completeTimeout())}
	wait := resendMin
	var answer error
	for {
		final, again := completeVerdict(s.completeSend(ctx, keys, args), answer, s.resendsFailedSends())
		answer = final
		if !again || !s.timeToWaitAgain(ctx, wait) {
			return answer
		}
		wait = min(2*wait, resendMax)
	}
}

// completeSend sends a Complete once, within CallTimeout.
func (s *IdempotencyStore) completeSend(ctx context.Context, keys []string, args []any) error {
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout())
	defer cancel()
	return s.completeOnce(ctx, keys, args)
}

// completeTimeout bounds one Complete, resends included. Its nonce
// lives as long: the cap keeps a store's nonces to those of a minute of
// Completes.
func (s *IdempotencyStore) completeTimeout() time.Duration {
	d := s.opts.CompleteTimeout
	if d <= 0 && s.opts.WaitReplicas > 0 {
		d = DefaultCompleteTimeout
	}
	return min(max(d, s.callTimeout()), MaxCallTimeout)
}

// resendsFailedSends reports whether a Complete whose send failed is
// sent again: only when CompleteTimeout leaves time beyond one send.
func (s *IdempotencyStore) resendsFailedSends() bool {
	return s.completeTimeout() > s.callTimeout()
}

// completeVerdict judges one send of a Complete: err is its result,
// prev what the sends before it left to answer (nil before the first),
// and persist whether a send that failed is sent again (CompleteTimeout
// above CallTimeout). It returns what Complete answers if it stops here,
// and whether to send again (while CompleteTimeout leaves time).
//
// Done: a send that recorded the response on enough replicas (nil), a
// stale token (another owner holds the key: sending again changes
// nothing), and a master with more replicas than WaitReplicas (a
// configuration to fix, which the next send meets too). A full Redis
// stops too: the first send's ErrStoreFull lets the Handler free the
// key, but after a write that some server recorded (ErrNotReplicated),
// what stands is that write.
//
// Sent again: a write too few replicas acknowledged (ErrNotReplicated:
// recorded on the server that ran it, which a failover may replace by a
// replica that lacks it), and a send that got no answer or an error (a
// killed primary, a connection closed by a switchover, READONLY from an
// old primary turned replica): under the same nonce a send applies once,
// wherever it lands; but only with persist, since at the default a
// Redis that is down would hold every Complete for CallTimeout. Once a
// write was recorded, a later send that fails leaves ErrNotReplicated
// the answer: the response is on a server.
func completeVerdict(err, prev error, persist bool) (final error, again bool) {
	notReplicated := errors.Is(prev, ErrNotReplicated)
	switch {
	case err == nil, errors.Is(err, idempotency.ErrStaleToken), errors.Is(err, ErrReplicasUncounted):
		return err, false
	case errors.Is(err, idempotency.ErrStoreFull):
		if notReplicated {
			return prev, false
		}
		return err, false
	case errors.Is(err, ErrNotReplicated):
		return err, true
	case !notReplicated:
		return err, persist
	}
	return prev, persist
}

// completeOnce runs the complete script once (under one nonce, which
// every later run of the same Complete shares), waiting for replicas
// when the store does.
//
// A Complete fewer replicas acknowledged is recorded (and its lock
// deleted) on the server that ran it, which replays the response; a
// replica that missed it still holds the reservation. Complete sends it
// again while CompleteTimeout leaves time for another wait (a Sentinel
// switchover reaches the client only once the sentinels have
// reconfigured the replicas, seconds later: give the store a
// CompleteTimeout of several seconds where failovers must not run
// operations twice): on the same
// primary the nonce answers at once and the WAIT counts again; after a
// switchover, the client reaches the promoted replica, which holds the
// reservation (every replica acknowledged it) and records the response
// there. A Complete that still fails leaves the reservation on a replica
// that may be promoted: its lock expires there in its own time, and a
// retry then takes the key over (Reservation.TookOver) as from an owner
// that died.
func (s *IdempotencyStore) completeOnce(ctx context.Context, keys []string, args []any) error {
	cmd, acked := s.run(ctx, "complete", completeScript, keys, args...)
	ok, err := cmd.Int()
	if err != nil {
		return wrapStoreErr("complete", err)
	}
	if ok != 1 {
		return idempotency.ErrStaleToken
	}
	return acked
}

// timeToWaitAgain waits pause and reports whether ctx then leaves time
// for another wait for replicas (with as much again to spare for the
// script and the round trip).
func (s *IdempotencyStore) timeToWaitAgain(ctx context.Context, pause time.Duration) bool {
	if d, ok := ctx.Deadline(); ok && time.Until(d) < pause+2*s.waitTimeout() {
		return false
	}
	t := time.NewTimer(pause)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Release implements [idempotency.Store].
func (s *IdempotencyStore) Release(ctx context.Context, key string, token idempotency.Token) error {
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout())
	defer cancel()
	// Release waits for no replica: one that misses it keeps the key
	// reserved until its lock expires, which runs nothing twice.
	keys := s.keys(key)
	ok, err := resend(ctx, false, s.reloader(ctx), func() *redis.Cmd {
		return releaseScript.Run(ctx, s.rdb, keys, tokenArg(token), s.nonceTTL())
	}).Int()
	if err != nil {
		return wrapStoreErr("release", err)
	}
	if ok != 1 {
		return idempotency.ErrStaleToken
	}
	return nil
}

// The scripts. A record is a hash: st ("p" while in progress, "c" once
// completed), fp (the fingerprint), tok (the fencing token, in decimal
// text; see fencing.go) and, when completed, status, hdr (the header, as
// encodeHeader writes it) and body. The lock is a string holding the
// token, set with PX: while it exists, the reservation's owner is alive.
// Comparing tokens as text avoids Lua's floating-point numbers.
//
// Each call carries a nonce key (see nonce.go). A script that changes
// the record remembers its answer there for the nonce's TTL, and a script
// that finds its nonce answers that again and changes nothing: a second
// delivery of one Reserve answers the caller's own reservation rather
// than "in progress", and of one Complete or Release, success rather than
// a stale token.

// reserveScript: KEYS record, lock, nonce; ARGV fingerprint, lock TTL
// (ms), reservation TTL (ms), nonce TTL (ms), "1" to check the server's
// maxmemory-policy first (see eviction.go). Returns {1, token, took
// over}, {2}, {4} or {3, 0, 0, status, header, body}; or, having written
// nothing, {5, policy} on a server that may evict, and {6} for a call
// abandoned before it ran (its nonce holds "x"; see abandon.go).
//
// A reservation's nonce also keeps what it replaced, so that the
// reservation can be undone (see abandonScript): "token took-over
// replaced-token replaced-TTL", where on a take-over the replaced token
// is the expired reservation's and the TTL its record's in milliseconds,
// and on a fresh key they are "0" and 0.
//
// A lock without its record (evicted, or deleted by hand) is a live
// owner whose fingerprint is gone: in progress, until the lock expires.
// The token is max(last + 1, TIME in microseconds), formatted with %d:
// Lua prints numbers above 10^14 in exponent form.
//
// A second delivery refreshes its nonce's TTL: that write moves the
// connection's replication offset past everything the first delivery
// wrote, so a WAIT after it counts replicas that have the reservation.
var reserveScript = redis.NewScript(`
if ARGV[5] == '1' then
  local info = redis.pcall('INFO', 'memory')
  if type(info) ~= 'string' then return {5, ''} end
  local policy = string.match(info, 'maxmemory_policy:([%w%-]+)')
  if policy ~= 'noeviction' then return {5, policy or ''} end
end
local seen = redis.call('GET', KEYS[3])
if seen == 'x' then return {6} end
if seen then
  redis.call('PEXPIRE', KEYS[3], ARGV[4])
  local tok, took = string.match(seen, '^(%d+) (%d) ')
  return {1, tonumber(tok), tonumber(took)}
end
local rec = redis.call('HMGET', KEYS[1], 'st', 'fp', 'tok')
local took = 0
local last = 0
local prev = '0'
local pttl = 0
if rec[1] then
  if rec[2] ~= ARGV[1] then return {4} end
  if rec[1] == 'c' then
    local r = redis.call('HMGET', KEYS[1], 'status', 'hdr', 'body')
    return {3, 0, 0, r[1], r[2], r[3]}
  end
  if redis.call('EXISTS', KEYS[2]) == 1 then return {2} end
  took = 1
  last = tonumber(rec[3]) or 0
  if last > 0 then prev = rec[3] end
  pttl = redis.call('PTTL', KEYS[1])
elseif redis.call('EXISTS', KEYS[2]) == 1 then
  return {2}
end
local now = redis.call('TIME')
local tok = string.format('%d', math.max(last + 1, tonumber(now[1]) * 1000000 + tonumber(now[2])))
redis.call('HSET', KEYS[1], 'st', 'p', 'fp', ARGV[1], 'tok', tok)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('SET', KEYS[2], tok, 'PX', ARGV[2])
redis.call('SET', KEYS[3], tok .. ' ' .. took .. ' ' .. prev .. ' ' .. pttl, 'PX', ARGV[4])
return {1, tonumber(tok), took}
`)

// completeScript: KEYS record, lock, nonce; ARGV token, TTL (ms), status,
// header, body, nonce TTL (ms). Returns 1, or 0 when the token does not
// own the reservation.
//
// A second delivery refreshes its nonce's TTL, for the WAIT after it
// (see reserveScript).
//
// Its first write is PEXPIRE, which Redis allows over maxmemory: once a
// script has written, Redis lets it finish, so a full Redis still records
// the response. The operation has run; refusing the record would free
// the key (the Handler releases it on ErrStoreFull) and the client's retry
// would run the operation again. The overshoot is one response per
// running operation.
var completeScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('PEXPIRE', KEYS[3], ARGV[6])
  return 1
end
local rec = redis.call('HMGET', KEYS[1], 'st', 'tok')
if rec[1] ~= 'p' or rec[2] ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('HSET', KEYS[1], 'st', 'c', 'status', ARGV[3], 'hdr', ARGV[4], 'body', ARGV[5])
redis.call('DEL', KEYS[2])
redis.call('SET', KEYS[3], '1', 'PX', ARGV[6])
return 1
`)

// releaseScript: KEYS record, lock, nonce; ARGV token, nonce TTL (ms).
// Returns 1, or 0 when the token does not own the reservation.
var releaseScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[3]) == 1 then return 1 end
local rec = redis.call('HMGET', KEYS[1], 'st', 'tok')
if rec[1] ~= 'p' or rec[2] ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('SET', KEYS[3], '1', 'PX', ARGV[2])
return 1
`)

// tokenArg is token as the script compares it: the decimal text the
// reserve script stored. Token 0, never issued, matches nothing.
func tokenArg(t idempotency.Token) string { return strconv.FormatUint(uint64(t), 10) }

// wrapStoreErr names the package and the operation in a Redis error, and
// explains the errors Redis gives for a prefix shared with other data or a
// full memory. The key is never named: it may be a secret of the client.
func wrapStoreErr(op string, err error) error {
	switch {
	case redis.HasErrorPrefix(err, "WRONGTYPE"), redis.HasErrorPrefix(err, "ERR value is not an integer"):
		return fmt.Errorf("redisretry: idempotency %s: a key under the store's prefix holds other data; give the store a prefix of its own: %w", op, err)
	case redis.HasErrorPrefix(err, "OOM"):
		// Redis reports maxmemory only by this error prefix.
		return fmt.Errorf("redisretry: idempotency %s: %w: %w", op, idempotency.ErrStoreFull, err)
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		return fmt.Errorf("redisretry: idempotency %s: no answer from Redis in time: %w", op, err)
	}
	return fmt.Errorf("redisretry: idempotency %s: %w", op, err)
}

// isTimeout reports a network timeout: go-redis with ContextTimeoutEnabled
// sets the context's deadline on the connection, so a call that runs out
// of time fails with an i/o timeout rather than the context's error.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// errBadRecord reports a script reply no script of this store returns: a
// record written by something else.
var errBadRecord = errors.New("malformed record; give the store a prefix of its own")

// parseReservation decodes the reserve script's reply: {state, token,
// took over} or, for a completed record, {3, 0, 0, status, header,
// body}.
func parseReservation(res []any) (idempotency.Reservation, error) {
	if len(res) == 0 {
		return idempotency.Reservation{}, errBadRecord
	}
	state, _ := res[0].(int64)
	switch idempotency.State(state) {
	case idempotency.StateInProgress, idempotency.StateMismatch:
		return idempotency.Reservation{State: idempotency.State(state)}, nil
	case idempotency.StateReserved:
		if len(res) != 3 {
			return idempotency.Reservation{}, errBadRecord
		}
		tok, _ := res[1].(int64)
		took, _ := res[2].(int64)
		if tok <= 0 {
			return idempotency.Reservation{}, errBadRecord
		}
		return idempotency.Reservation{State: idempotency.StateReserved, Token: idempotency.Token(tok), TookOver: took == 1}, nil
	case idempotency.StateCompleted:
		resp, err := parseResponse(res)
		if err != nil {
			return idempotency.Reservation{}, err
		}
		return idempotency.Reservation{State: idempotency.StateCompleted, Response: resp}, nil
	}
	return idempotency.Reservation{}, errBadRecord
}

// parseResponse decodes a completed record's status, header and body.
func parseResponse(res []any) (*idempotency.Response, error) {
	if len(res) != 6 {
		return nil, errBadRecord
	}
	statusText, ok1 := res[3].(string)
	hdrText, ok2 := res[4].(string)
	body, ok3 := res[5].(string)
	if !ok1 || !ok2 || !ok3 {
		return nil, errBadRecord
	}
	status, err := strconv.Atoi(statusText)
	if err != nil {
		return nil, errBadRecord
	}
	hdr, ok := decodeHeader(hdrText)
	if !ok {
		return nil, errBadRecord
	}
	resp := &idempotency.Response{Status: status, Header: hdr}
	if body != "" {
		resp.Body = []byte(body)
	}
	return resp, nil
}

// encodeHeader writes h byte for byte, whatever its names and values hold
// (JSON would replace bytes that are not UTF-8, and replays must be
// exact): for each name, its length and bytes, its number of values, and
// each value's length and bytes, lengths as uvarints.
func encodeHeader(h http.Header) []byte {
	var b []byte
	for name, values := range h {
		b = binary.AppendUvarint(b, uint64(len(name)))
		b = append(b, name...)
		b = binary.AppendUvarint(b, uint64(len(values)))
		for _, v := range values {
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	return b
}

// decodeHeader reads what encodeHeader wrote; ok is false when s is not
// such an encoding.
func decodeHeader(s string) (h http.Header, ok bool) {
	b := []byte(s)
	next := func() (string, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return "", false
		}
		v := string(b[k : k+int(n)])
		b = b[k+int(n):]
		return v, true
	}
	for len(b) > 0 {
		name, ok := next()
		if !ok {
			return nil, false
		}
		count, k := binary.Uvarint(b)
		if k <= 0 || count > uint64(len(b)) {
			return nil, false
		}
		b = b[k:]
		if h == nil {
			h = http.Header{}
		}
		values := make([]string, 0, count)
		for range count {
			v, ok := next()
			if !ok {
				return nil, false
			}
			values = append(values, v)
		}
		h[name] = values
	}
	return h, true
}
