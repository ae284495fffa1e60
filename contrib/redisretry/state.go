package redisretry

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"
)

// State tells where a [Budget] keeps its tokens now.
type State int32

const (
	// Shared means the bucket in Redis, shared by every process using
	// the key.
	Shared State = iota
	// Local means the process's own fallback bucket, while Redis is
	// unavailable (and after Close).
	Local
)

// stateClosed is the state after Close: local, and never probed again.
const stateClosed = int32(Local) + 1

// String returns "shared" or "local".
func (s State) String() string {
	if s == Shared {
		return "shared"
	}
	return "local"
}

// fallBack switches from the shared bucket to the local one, reporting
// the change once, after err from a Redis call. The counts pending are
// dropped (the leased tokens of the failed call are replayed, settle.go).
func (b *Budget) fallBack(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.state.CompareAndSwap(int32(Shared), int32(Local)) {
		return
	}
	b.takePending()
	if b.opts.Logger != nil {
		b.opts.Logger.Warn("redisretry: Redis unavailable; using the local retry budget",
			slog.String("key", b.keys[0]), slog.Any("error", err))
	}
	if b.opts.OnStateChange != nil {
		b.opts.OnStateChange(Local)
	}
}

// recover switches from the local bucket back to the shared one,
// reporting the change once.
func (b *Budget) recover() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.state.CompareAndSwap(int32(Local), int32(Shared)) {
		return
	}
	if b.opts.Logger != nil {
		b.opts.Logger.Info("redisretry: Redis answers; using the shared retry budget", slog.String("key", b.keys[0]))
	}
	if b.opts.OnStateChange != nil {
		b.opts.OnStateChange(Shared)
	}
}

// run is the background goroutine: every FlushInterval it sends the
// pending counts, and while the Budget is local it probes Redis instead,
// with jittered exponential backoff, one probe at a time. It returns when
// Close closes stop.
func (b *Budget) run() {
	defer close(b.done)
	interval := b.flushInterval()
	backoff := interval
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-timer.C:
		}
		next := interval
		if b.state.Load() == int32(Local) {
			ok := b.probe()
			backoff = nextBackoff(backoff, ok, interval, b.maxProbeInterval())
			if !ok {
				next = spread(backoff, rand.Float64())
			}
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), b.callTimeout())
			b.Flush(ctx)
			cancel()
		}
		timer.Reset(next)
	}
}

// probe replays the calls whose answer was lost (settle.go), or, when
// there are none, makes one call that changes no count (it creates a
// missing key full and refreshes the TTL), and switches back to the shared bucket when
// it succeeds. While an earlier call is still waiting for a reply (a client
// without ContextTimeoutEnabled waits for its ReadTimeout), it makes none:
// a Redis that does not answer gets at most one call at a time.
func (b *Budget) probe() bool {
	if b.inflight.Load() > 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.callTimeout())
	defer cancel()
	sent, err := b.replay(ctx, false)
	if err == nil && !sent {
		_, err = b.send(ctx, scriptCall{nonce: b.nonces.next()}, 0)
	}
	if err != nil {
		reloadClusterMap(b.rdb)
		return false
	}
	b.recover()
	return true
}

// reloadClusterMap asks a Cluster client to load the Cluster's map of
// slots again, in the background (go-redis runs at most one reload at a
// time); other clients have none. go-redis reloads it on a MOVED or
// READONLY answer and every ClusterStateReloadInterval (a minute by
// default), not when a master stops answering: its calls keep going to
// the dead master. So a probe that failed reloads it, and once a replica
// has taken over, the next probe reaches it and the Budget is back on the
// shared bucket within two probes.
func reloadClusterMap(rdb any) {
	if c, ok := rdb.(interface{ ReloadState(context.Context) }); ok {
		c.ReloadState(context.Background())
	}
}

// nextBackoff returns the wait after an attempt to reach Redis: first
// after one that succeeded (ok), else twice the last, at most limit.
func nextBackoff(last time.Duration, ok bool, first, limit time.Duration) time.Duration {
	if ok {
		return first
	}
	return max(min(2*last, limit), first)
}

// spread returns a wait of d, half fixed and half random (from r in
// [0, 1)), so that a fleet that lost Redis together does not try it again
// together.
func spread(d time.Duration, r float64) time.Duration {
	return d/2 + time.Duration(float64(d/2)*r)
}
