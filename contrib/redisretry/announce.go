package redisretry

import (
	"context"
	"math/rand/v2"
	"strings"

	"github.com/redis/go-redis/v9"
)

// A refusal remembered by one process saves the calls of that process
// only, and in a large fleet each process sees too few operations for its
// own memory to matter: a hundred processes sharing 200 failing
// operations a second each ask about every half second, so each would
// still ask Redis for nearly every retry. So the bucket tells the fleet.
// When the script refuses a Withdraw, or grants the last whole token, it
// publishes one message on the bucket's sharded Pub/Sub channel (SPUBLISH,
// Redis 7 or later, in the key's Cluster slot), at most once per half
// RefusalMemory (a marker key with that expiry), and every Budget
// subscribed to the channel remembers the refusal as if Redis had refused
// it, and believes the bucket empty, keeping its deposits as credit. The first process to ask again after the memory ends is refused in
// turn and tells the others, so while the bucket stays empty the whole
// fleet asks about twice per RefusalMemory, whatever its size.
//
// The subscription is a connection of its own per Budget, opened by a
// goroutine of its own (NewBudget makes no call), and go-redis reconnects
// it after a failure. A Budget that misses a message only asks Redis
// once more: messages save calls and are never needed for correctness. On
// a server before Redis 7 nothing is announced (the script ignores the
// failure of SPUBLISH) and each process saves only its own calls.

// announceKey returns the name of the marker key and of the channel: the
// key's slot prefix, as the nonces use.
func announceKey(noncePrefix string) string {
	return strings.TrimSuffix(noncePrefix, "nonce:") + "refused"
}

// announceMillis returns how long the marker lives, which is how often
// the bucket can announce a refusal: half the memory, in milliseconds, or
// 0 (never) when refusals are not remembered.
func (b *Budget) announceMillis() int64 {
	if b.opts.RefusalMemory < 0 {
		return 0
	}
	return millis(b.refusalMemory() / 2)
}

// listen subscribes ps to the bucket's announcements and remembers each
// as a refusal, until ctx ends; then it closes ps. It runs on its own
// goroutine, so that a Redis slow to accept the subscription delays no
// caller.
func (b *Budget) listen(ctx context.Context, ps *redis.PubSub) {
	defer close(b.listened)
	defer ps.Close()
	// A failure is no matter: go-redis subscribes again when it
	// reconnects, which the channel's goroutine does on its own.
	_ = ps.SSubscribe(ctx, b.announce)
	msgs := ps.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-msgs:
			if !ok {
				return
			}
			// As a reply would: the bucket is empty (less than a token).
			b.lastTokens.Store(0)
			b.refusedUntil.Store(refusalEnd(b.now().UnixNano(), b.refusalMemory(), rand.Float64()))
			b.heard.Add(1)
		}
	}
}
