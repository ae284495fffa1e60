package redisretry

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/httpretry/httpretry/idempotency"
	"github.com/redis/go-redis/v9"
)

// A Reserve that the store gave up on may still run: a Redis stalled past
// CallTimeout runs the script once it wakes, and a script written to a
// connection whose reply never came may have run already. Its caller was
// answered an error (the Handler answered 503 and ran nothing), so a
// reservation it made has no owner: the key would stay locked for the
// lock TTL, every retry answered "in progress", and the operation never
// run. So the store abandons such a call before Reserve returns: one
// script, sent on another connection, on the call's nonce key (see
// nonce.go), which the reserve script writes with its reservation:
//
//   - no nonce yet: the reserve has not run. The abandon leaves "x" under
//     the nonce, for the nonce's TTL, and the reserve script, finding it,
//     reserves nothing ({6}) whenever it runs.
//   - a nonce holding a reservation: the reserve ran. The store puts back
//     what it replaced, as for a reservation too few replicas
//     acknowledged (undoScript): a fresh key is freed, a take-over gives
//     the key back to the expired reservation.
//
// Whichever of the two scripts Redis runs first, the key ends free (or
// back with its previous owner), and the two may reach Redis in either
// order: they travel on different connections. The abandon is bounded by
// CallTimeout of its own, so a Reserve on a stalled Redis returns within
// twice CallTimeout; an abandon that gets no answer either was written to
// Redis all the same, and runs when Redis does. Only an abandon that
// never left the client (no connection to be had) leaves a late
// reservation locked until its lock expires.

// errAbandoned is the error of a reserve script that found its call
// abandoned: only a call the store no longer waits for can meet it.
var errAbandoned = errors.New("redisretry: idempotency reserve: the call was abandoned before Redis ran it")

// Codes of the reserve script's answers that wrote nothing and are not a
// reservation's state.
const (
	replyPolicy    = 5 // {5, policy}: the server may evict (eviction.go)
	replyAbandoned = 6 // {6}: the call was abandoned before it ran
)

// abandonScript: KEYS a Reserve's nonce; ARGV the nonce's TTL (ms).
// Returns "" having left "x" under a nonce that did not exist, and the
// nonce's value otherwise: the reserve's record of its reservation,
// "token took-over replaced-token replaced-TTL", or "x".
var abandonScript = redis.NewScript(`
local seen = redis.call('GET', KEYS[1])
if seen then return seen end
redis.call('SET', KEYS[1], 'x', 'PX', ARGV[1])
return ''
`)

// unanswered reports whether a call that failed with err may have run in
// Redis all the same: anything but Redis's own error reply, and a
// connection never had from the pool.
func unanswered(err error) bool {
	var rerr redis.Error
	return !errors.As(err, &rerr) && !errors.Is(err, redis.ErrPoolTimeout)
}

// abandon makes sure the Reserve whose script keys are keys reserves
// nothing, best effort, within CallTimeout of its own.
func (s *IdempotencyStore) abandon(keys []string) {
	ctx, cancel := context.WithTimeout(context.Background(), s.callTimeout())
	defer cancel()
	seen, err := resend(ctx, false, s.reloader(ctx), func() *redis.Cmd {
		return abandonScript.Run(ctx, s.rdb, keys[2:], s.nonceTTL())
	}).Text()
	if err != nil {
		return
	}
	if token, prev, ok := parseNonce(seen); ok {
		s.undo(keys, token, prev)
	}
}

// parseNonce reads a reservation's nonce value, "token took-over
// replaced-token replaced-TTL"; ok is false for anything else ("",
// "x").
func parseNonce(v string) (token idempotency.Token, prev replaced, ok bool) {
	f := strings.Fields(v)
	if len(f) != 4 {
		return 0, replaced{}, false
	}
	tok, err1 := strconv.ParseUint(f[0], 10, 64)
	ttl, err2 := strconv.ParseInt(f[3], 10, 64)
	if err1 != nil || err2 != nil || tok == 0 {
		return 0, replaced{}, false
	}
	return idempotency.Token(tok), replaced{token: f[2], ttl: ttl}, true
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
