package redisretry

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// bucketScript is the whole shared bucket: one atomic step that adds
// pending units up to capacity and then, when asked for up to n whole
// tokens, takes as many as the bucket holds, at most n, or refuses, and
// refreshes the key's TTL. A missing key is a full bucket, as
// a new TokenBucket is. The count is kept as a decimal integer of
// millionths of a token; Lua's float64 numbers hold it exactly below 2^53.
// The answer is remembered under the call's nonce, so that a second
// delivery of the same call (see nonce.go) answers the same and adds and
// takes nothing.
//
// KEYS[1] the bucket, KEYS[2] the call's nonce; ARGV[1] capacity, ARGV[2]
// units to add, ARGV[3] whole tokens to take at most (0 for a flush),
// ARGV[4] TTL in milliseconds, ARGV[5] how long to remember the nonce, in
// milliseconds, ARGV[6] how long the marker of an announced refusal
// lives, in milliseconds (0: never announce); KEYS[3] is the marker and
// the channel of announce.go. A take refused, or one that leaves less
// than a whole token, is announced unless the marker lives. ARGV[7] is 1
// when the server's eviction policy is checked first (budget_eviction.go):
// KEYS[4] holds the run_id of the server last found not to evict, for
// ARGV[8] milliseconds; a server that may evict answers an EVICTS error
// and nothing changes. It returns {tokens granted, units after}.
var bucketScript = redis.NewScript(`
if ARGV[7] == '1' then
  -- pcall: a Redis that hides INFO cannot tell its policy, an error too.
  local ok, server = pcall(redis.call, 'INFO', 'server')
  if not ok then
    return redis.error_reply('EVICTS the policy cannot be read: INFO is refused')
  end
  local id = string.match(server, 'run_id:(%x+)')
  if not id or redis.call('GET', KEYS[4]) ~= id then
    local policy = string.match(redis.call('INFO', 'memory'), 'maxmemory_policy:([%w-]+)')
    if policy ~= 'noeviction' then
      return redis.error_reply('EVICTS maxmemory-policy is ' .. (policy or 'not in INFO memory'))
    end
    if id then
      redis.call('SET', KEYS[4], id, 'PX', ARGV[8])
    end
  end
end
local seen = redis.call('GET', KEYS[2])
if seen then
  local g, t = string.match(seen, '^(%d+) (%d+)$')
  return {tonumber(g), tonumber(t)}
end
local capacity = tonumber(ARGV[1])
local tokens = capacity
local v = redis.call('GET', KEYS[1])
if v then
  tokens = tonumber(v)
  if not tokens then
    return redis.error_reply('BADTOKENS the key does not hold a token count')
  end
end
tokens = math.min(tokens + tonumber(ARGV[2]), capacity)
local granted = math.min(tonumber(ARGV[3]), math.floor(tokens / 1000000))
if granted > 0 then
  tokens = tokens - granted * 1000000
else
  granted = 0
end
local announce = tonumber(ARGV[6])
if tonumber(ARGV[3]) > 0 and tokens < 1000000 and announce > 0 then
  if redis.call('SET', KEYS[3], '1', 'PX', announce, 'NX') then
    -- pcall: a server before Redis 7 has no SPUBLISH, and a refusal it
    -- cannot announce is still a refusal.
    redis.pcall('SPUBLISH', KEYS[3], '1')
  end
end
local count = string.format('%d', tokens)
redis.call('SET', KEYS[1], count, 'PX', ARGV[4])
redis.call('SET', KEYS[2], granted .. ' ' .. count, 'PX', ARGV[5])
return {granted, tokens}
`)

// errClosed is returned for a call attempted after Close.
var errClosed = errors.New("redisretry: budget closed")

// runScript runs c once and reports its answer. Every reply, a probe's
// included, says what the bucket holds: the next lease and whether
// deposits wait (lease.go) follow it.
func (b *Budget) runScript(ctx context.Context, c scriptCall) (reply, error) {
	keys := []string{b.keys[0], b.noncePrefix + c.nonce, b.announce, b.checked}
	res, err := bucketScript.Run(ctx, b.rdb, keys, b.capacity, c.add, c.want,
		millis(b.ttl()), nonceTTL(b.callTimeout()), b.announceMillis(),
		b.checkPolicy(), millis(policyMarkerLife)).Int64Slice()
	if err != nil {
		return reply{}, b.wrap(err)
	}
	if len(res) != 2 {
		return reply{}, fmt.Errorf("redisretry: key %q: the script returned %d values; want 2", b.keys[0], len(res))
	}
	b.lastTokens.Store(res[1])
	return reply{granted: res[0], tokens: res[1]}, nil
}

// result is what a call on its own goroutine hands back.
type result[T any] struct {
	v   T
	err error
}

// do runs f on a goroutine of its own, under ctx bounded by b's
// CallTimeout, and returns when f does or when that bound passes,
// whichever is first. A go-redis client without ContextTimeoutEnabled
// reads a reply until its ReadTimeout whatever the context says, so
// waiting for f alone could outlast the caller's deadline. Close waits for
// the calls left running. It is for calls that change nothing; the
// script's go through send (settle.go).
func do[T any](b *Budget, ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	var zero T
	if !b.startCall(false, false) {
		return zero, errClosed
	}
	ctx, cancel := context.WithTimeout(ctx, b.callTimeout())
	defer cancel()
	done := make(chan result[T], 1)
	go func() {
		defer b.calls.Done()
		v, err := f(ctx)
		b.inflight.Add(-1) // before the answer, as in send
		done <- result[T]{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// wrap names the package and the key in a Redis error, and explains the
// errors of a key that holds something else.
func (b *Budget) wrap(err error) error {
	switch {
	case errors.Is(err, errClosed):
		return err
	case redis.HasErrorPrefix(err, "EVICTS"):
		return fmt.Errorf("%w (key %q: %w)", ErrBudgetEviction, b.keys[0], err)
	case redis.HasErrorPrefix(err, "WRONGTYPE"), redis.HasErrorPrefix(err, "BADTOKENS"), errors.As(err, new(*strconv.NumError)):
		return fmt.Errorf("redisretry: key %q holds something other than a token count; give the budget a key of its own: %w", b.keys[0], err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("redisretry: key %q: no answer from Redis in time: %w", b.keys[0], err)
	}
	return fmt.Errorf("redisretry: key %q: %w", b.keys[0], err)
}
