package redisretry

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"time"

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
// The subscription is a connection of its own per Budget, owned by a
// goroutine of its own (NewBudget makes no call). Each attempt opens a
// new connection and subscribes, bounded by CallTimeout; when the
// connection fails, or the server ends the subscription (it sends
// sunsubscribe when the key's slot moves to another Cluster node, and
// answers MOVED to a client that still asks the old one), the goroutine
// subscribes again, on the slot's owner as the client knows it then, after
// FlushInterval (at most 100ms). After an attempt that did not subscribe
// it waits as the prober does, doubling up to MaxProbeInterval, half of each wait
// random, so that a dead Redis is not redialed ten times a second by
// every process of the fleet. A subscription that hears nothing for
// listenQuiet is pinged, and abandoned when the ping is not answered
// within another listenQuiet. Close ends the subscription by closing its
// connection. A Budget that misses a message only asks Redis once more:
// messages save calls and are never needed for correctness. On a server
// before Redis 7 nothing is announced (the script ignores the failure of
// SPUBLISH) and each process saves only its own calls.

// listenQuiet is how long a subscription may hear nothing before it is
// pinged, and then before it is abandoned.
const listenQuiet = 30 * time.Second

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

// listen keeps b subscribed to the bucket's announcements and remembers
// each as a refusal, until ctx ends. It runs on its own goroutine, so that
// a Redis slow to accept the subscription delays no caller.
func (b *Budget) listen(ctx context.Context) {
	defer close(b.listened)
	// A subscription the server ended is made again soon, whatever
	// FlushInterval: the announcements it misses meanwhile cost calls.
	interval := min(b.flushInterval(), DefaultFlushInterval)
	backoff := interval
	for {
		subscribed := b.subscribe(ctx)
		backoff = nextBackoff(backoff, subscribed, interval, b.maxProbeInterval())
		timer := time.NewTimer(spread(backoff, rand.Float64()))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

// subscribe makes one attempt: it subscribes on a new connection and
// remembers the announcements it hears until the connection fails, the
// server ends the subscription or ctx ends, and reports whether it was
// subscribed.
func (b *Budget) subscribe(ctx context.Context) (subscribed bool) {
	ps := b.rdb.SSubscribe(ctx) // no channel yet: no call
	// Close, or the end of the attempt, closes the connection: a read
	// blocked on it returns at once.
	closed := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(closed)
		ps.Close()
	})
	defer func() {
		if stop() {
			ps.Close()
		} else {
			<-closed // Close's, which returns once its connection is closed
		}
	}()
	call, cancel := context.WithTimeout(ctx, b.callTimeout())
	err := ps.SSubscribe(call, b.announce)
	cancel()
	quiet := 0
	for err == nil && !ended(ctx) {
		var msg any
		msg, err = ps.ReceiveTimeout(ctx, listenQuiet)
		switch heard := b.hear(msg, err); heard {
		case heardNothing:
			if quiet++; quiet == 2 {
				return subscribed
			}
			err = ps.Ping(ctx)
		case heardEnd:
			return subscribed
		default:
			quiet = 0
			subscribed = subscribed || heard == heardSubscribed
		}
	}
	if redis.HasErrorPrefix(err, "MOVED") {
		// The client's map of the Cluster is out of date.
		reloadClusterMap(b.rdb)
	}
	return subscribed
}

// What a subscription heard.
const (
	heardOther      = iota // a pong, or an error the loop ends on
	heardNothing           // a read that timed out
	heardSubscribed        // the server's confirmation
	heardEnd               // the server ended the subscription
	heardRefusal           // an announcement, remembered
)

// hear remembers an announcement and tells the subscription loop what msg
// (or err) was.
func (b *Budget) hear(msg any, err error) int {
	var timeout interface{ Timeout() bool }
	switch m := msg.(type) {
	case nil:
		if errors.As(err, &timeout) && timeout.Timeout() {
			return heardNothing
		}
	case *redis.Subscription:
		if m.Kind == "sunsubscribe" {
			return heardEnd
		}
		return heardSubscribed
	case *redis.Message:
		// As a reply would: the bucket is empty (less than a token).
		b.lastTokens.Store(0)
		b.refusedUntil.Store(refusalEnd(b.now().UnixNano(), b.refusalMemory(), rand.Float64()))
		b.heard.Add(1)
		return heardRefusal
	}
	return heardOther
}
