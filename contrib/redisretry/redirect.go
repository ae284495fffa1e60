package redisretry

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// A call of the store can meet a Redis Cluster in motion, or lose its
// reply, and give up before the call's bound although waiting would
// answer it:
//
//   - MOVED: the key's slot has a new master (a failover, a finished
//     migration). go-redis follows it, except on the connection to one
//     master that WaitReplicas needs; there the store reloads the slot
//     map and sends again.
//   - ASK or TRYAGAIN: the slot is half-way through a migration. A
//     script of the store touches several keys, among them a new nonce
//     that neither node has, so the importing node answers TRYAGAIN even
//     after ASKING: nothing runs until the hand-over, and go-redis gives
//     up after a few quick tries. The store waits and sends again.
//   - a lost reply (the connection ended after the call was written): the
//     per-node client of a Cluster never sends a pipeline twice. With
//     WaitReplicas the store sends it again, a few times.
//
// Each call carries its nonce (see nonce.go), and a second delivery
// answers the first one's answer, so sending again is safe. All of it
// happens within CallTimeout.

// fault is what a failed call calls for.
type fault int

const (
	faultNone  fault = iota // answered
	faultFinal              // an answer, or out of time: return it
	faultMoved              // the slot moved: reload the slot map, send again
	faultWait               // migration under way: wait, send again
	faultLost               // the reply was lost: send again
)

// classifyFault says what err, from one call of a script, calls for.
func classifyFault(err error) fault {
	var rerr redis.Error
	switch {
	case err == nil:
		return faultNone
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, redis.ErrClosed):
		return faultFinal
	case redis.HasErrorPrefix(err, "MOVED "):
		return faultMoved
	case redis.HasErrorPrefix(err, "ASK "), redis.HasErrorPrefix(err, "TRYAGAIN"):
		return faultWait
	case errors.As(err, &rerr):
		return faultFinal
	}
	return faultLost
}

// Backoff between sends: doubling from resendMin to resendMax.
const (
	resendMin = 10 * time.Millisecond
	resendMax = 200 * time.Millisecond
)

// maxLostResends is how many times a call whose reply was lost is sent
// again: as many as go-redis's default MaxRetries.
const maxLostResends = 3

// resendAfter decides whether a call that failed with f, having lost
// lost replies so far, is sent again; lostResends is whether the store
// resends lost replies at all (go-redis does, except on a Cluster's
// per-node client).
func resendAfter(f fault, lost int, lostResends bool) bool {
	switch f {
	case faultMoved, faultWait:
		return true
	case faultLost:
		return lostResends && lost < maxLostResends
	}
	return false
}

// resend calls once until it answers, fails for good, or ctx ends,
// waiting with backoff between calls, and returns the last call's
// command. reload, when not nil, is called on MOVED.
func resend(ctx context.Context, lostResends bool, reload func(), once func() *redis.Cmd) *redis.Cmd {
	wait := resendMin
	lost := 0
	for {
		cmd := once()
		f := classifyFault(cmd.Err())
		if !resendAfter(f, lost, lostResends) {
			return cmd
		}
		if f == faultLost {
			lost++
		}
		if f == faultMoved && reload != nil {
			reload()
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return cmd
		case <-t.C:
		}
		wait = min(2*wait, resendMax)
	}
}

// reloader returns what learns the slot map again on s's client: nil
// but on a Cluster.
func (s *IdempotencyStore) reloader(ctx context.Context) func() {
	c, ok := s.rdb.(*redis.ClusterClient)
	if !ok {
		return nil
	}
	return func() { c.ReloadState(ctx) }
}
