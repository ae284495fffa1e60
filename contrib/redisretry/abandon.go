package redisretry

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Reserve that the store gave up on may still run: a Redis stalled past
// CallTimeout runs the script once it wakes, and a script written to a
// connection whose reply never came may have run already. Its caller was
// answered an error (the Handler answered 503 and ran nothing), so a
// reservation it made has no owner: the key would stay locked for the
// lock TTL, every retry answered "in progress", and the operation never
// run. So the store abandons such a call before Reserve returns: one
// script, sent on another connection, on the call's keys and nonce (see
// nonce.go), which the reserve script writes with its reservation:
//
//   - no nonce yet: the reserve has not run. The abandon leaves "x" under
//     the nonce, for the nonce's TTL, and the reserve script, finding it,
//     reserves nothing ({6}) whenever it runs.
//   - a nonce holding a reservation: the reserve ran. The abandon puts
//     back what it replaced, if the record still holds it: a fresh key
//     is freed; a take-over gives the record back the expired
//     reservation's token and TTL and deletes the lock (which had
//     expired), so the key keeps its first payload and the owner of the
//     expired lock may still Complete or Release. It then leaves "x"
//     under the nonce too.
//
// Each script does its part in Redis, whoever waits for its answer, so
// the two may run in either order (they travel on different
// connections) and at any time: the key ends free, or back with its
// previous owner. The abandon is bounded by abandonTimeout, so a Reserve
// on a stalled Redis returns within CallTimeout plus that; an abandon
// that gets no answer was written to Redis all the same, and runs when
// Redis does. Only an abandon that never left the client leaves a late
// reservation locked until its lock expires: one that waited for a
// connection longer than its bound (the client's pool taken by a burst
// that does not drain), or whose new connection's handshake (HELLO,
// AUTH) waited for a Redis stalled longer than both bounds.
//
// A reservation that too few replicas acknowledged is abandoned the same
// way (see replicas.go).

// errAbandoned is the error of a reserve script that found its call
// abandoned: only a call the store no longer waits for can meet it.
var errAbandoned = errors.New("redisretry: idempotency reserve: the call was abandoned before Redis ran it")

// Codes of the reserve script's answers that wrote nothing and are not a
// reservation's state.
const (
	replyPolicy    = 5 // {5, policy}: the server may evict (eviction.go)
	replyAbandoned = 6 // {6}: the call was abandoned before it ran
)

// abandonScript: KEYS record, lock and nonce of a Reserve; ARGV the
// nonce's TTL (ms). Returns 1 when it undid a reservation, 0 otherwise.
// The state was "p" and the fingerprint the same (a take-over needs
// both), so they stay as they are.
var abandonScript = redis.NewScript(`
local seen = redis.call('GET', KEYS[3])
redis.call('SET', KEYS[3], 'x', 'PX', ARGV[1])
if not seen then return 0 end
local tok, prev, pttl = string.match(seen, '^(%d+) %d (%d+) (%-?%d+)$')
if not tok then return 0 end
local rec = redis.call('HMGET', KEYS[1], 'st', 'tok')
if rec[1] ~= 'p' or rec[2] ~= tok then return 0 end
if prev == '0' then
  redis.call('DEL', KEYS[1], KEYS[2])
  return 1
end
redis.call('HSET', KEYS[1], 'tok', prev)
if tonumber(pttl) > 0 then redis.call('PEXPIRE', KEYS[1], pttl) end
redis.call('DEL', KEYS[2])
return 1
`)

// unanswered reports whether a call that failed with err may have run in
// Redis all the same: anything but Redis's own error reply, and a
// connection never had from the pool.
func unanswered(err error) bool {
	var rerr redis.Error
	return !errors.As(err, &rerr) && !errors.Is(err, redis.ErrPoolTimeout)
}

// abandonTimeout is the bound of an abandon: CallTimeout, and at least
// minAbandon, since an abandon often waits for a connection behind the
// very burst that made its Reserve time out.
func (s *IdempotencyStore) abandonTimeout() time.Duration {
	return max(s.callTimeout(), minAbandon)
}

// minAbandon is the shortest bound of an abandon.
const minAbandon = time.Second

// abandon makes sure the Reserve whose script keys are keys leaves no
// reservation, best effort, within abandonTimeout.
func (s *IdempotencyStore) abandon(keys []string) {
	ctx, cancel := context.WithTimeout(context.Background(), s.abandonTimeout())
	defer cancel()
	// EVAL, not EVALSHA: on a server that does not know the script, an
	// EVALSHA whose NOSCRIPT answer comes too late to be read would run
	// nothing, and its EVAL would never be sent.
	resend(ctx, false, s.reloader(ctx), func() *redis.Cmd {
		return abandonScript.Eval(ctx, s.rdb, keys, s.nonceTTL())
	})
}

// reserveRefusal returns the error of a reserve script's answer that
// wrote nothing and is not a state ({5, policy}, {6}), and nil for any
// other answer.
func reserveRefusal(res []any) error {
	if len(res) == 0 {
		return nil
	}
	switch code, _ := res[0].(int64); code {
	case replyPolicy:
		policy := ""
		if len(res) > 1 {
			policy, _ = res[1].(string)
		}
		return policyRefusal(policy)
	case replyAbandoned:
		return errAbandoned
	}
	return nil
}
