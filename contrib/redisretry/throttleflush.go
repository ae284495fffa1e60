package redisretry

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// This file holds a ThrottleState's two goroutines: the flusher, which
// sends counts and publishes the fleet's, and the listener, which hears
// the publications.

// maxStateBackoff caps the wait between attempts on a Redis that fails.
const maxStateBackoff = 5 * time.Second

// listenIdle is how long the subscription may hear nothing before it is
// pinged.
const listenIdle = time.Minute

// flushLoop waits for counts, lets them gather for FlushInterval, and
// sends them; after a failure it waits, doubling from 100ms up to 5s,
// before it sends again, dropping what gathered meanwhile.
func (s *ThrottleState) flushLoop() {
	var backoff time.Duration
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.wake:
		}
		if !s.sleep(max(s.opts.FlushInterval, backoff)) {
			return
		}
		if err := s.flush(); err != nil {
			backoff = min(max(2*backoff, 100*time.Millisecond), maxStateBackoff)
			if !s.failed.Swap(true) && s.opts.Logger != nil {
				s.opts.Logger.Warn("redisretry: throttle state: Redis failed; deciding on local counts", "prefix", s.prefix, "err", err)
			}
			continue
		}
		backoff = 0
		if s.failed.Swap(false) && s.opts.Logger != nil {
			s.opts.Logger.Info("redisretry: throttle state: Redis answers again", "prefix", s.prefix)
		}
	}
}

// sleep waits d on the clock; false when the state was closed meanwhile.
func (s *ThrottleState) sleep(d time.Duration) bool {
	t := s.opts.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.ctx.Done():
		return false
	case <-t.Chan():
		return true
	}
}

// flushed is what one flush sends for one destination.
type flushed struct {
	d     *fleetDest
	cells []cell
	claim *redis.BoolCmd  // the claim of this BroadcastInterval's publication, when due
	read  *redis.SliceCmd // the newest buckets, when this process publishes
	head  int64
}

// flush sends the counts of every destination with pending ones, in one
// pipeline that also claims the publication of those nobody published
// lately (SET NX on a marker that lives one BroadcastInterval), then
// reads the newest buckets of those it claimed, and publishes them. A
// destination the fleet does not hold hot is read in the first
// pipeline, unclaimed.
func (s *ThrottleState) flush() error {
	s.mu.Lock()
	dirty := make([]*fleetDest, 0, len(s.dirty))
	for d := range s.dirty {
		dirty = append(dirty, d)
	}
	clear(s.dirty)
	s.mu.Unlock()

	now := s.opts.Clock.Now()
	head := bucketOf(now, s.opts.Bucket)
	var work []flushed
	for _, d := range dirty {
		weight := d.acceptWeight(now, s.opts.Bucket, s.opts.Stale)
		if c, ok := d.take(head, s.opts.Share, weight, s.opts.Rand()); ok {
			work = append(work, flushed{d: d, cells: []cell{c}, head: head})
		}
	}
	if len(work) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.CallTimeout)
	defer cancel()
	pipe := s.rdb.Pipeline()
	for i := range work {
		w := &work[i]
		for _, c := range w.cells {
			pipe.HIncrBy(ctx, w.d.name, strconv.FormatInt(c.b, 10), pack(c.req, c.acc))
		}
		switch {
		case !w.d.broadcastDue(now, s.opts.BroadcastInterval):
		case w.d.hotUntil.Load() <= now.UnixNano():
			// News: the fleet is not hot as far as this process
			// heard. It reads and publishes at once, without a claim,
			// so that the fleet learns of an outage a round trip
			// sooner; at its start a few processes may publish
			// together.
			w.read = pipe.HMGet(ctx, w.d.name, bucketFields(head, 0, fleetRing)...)
			pipe.PExpire(ctx, w.d.name, s.opts.TTL)
		default:
			w.claim = pipe.SetNX(ctx, w.d.name+":pub", "1", s.opts.BroadcastInterval)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	acked := s.opts.Clock.Now()
	for _, w := range work {
		w.d.sentAt(w.cells, acked, head-fleetRing)
	}
	return s.publish(ctx, work, acked)
}

// publish reads the newest buckets of each destination whose
// publication this process claimed, and publishes them with those read
// already (news, see flush).
func (s *ThrottleState) publish(ctx context.Context, work []flushed, at time.Time) error {
	pipe := s.rdb.Pipeline()
	n := 0
	for i := range work {
		w := &work[i]
		if w.claim == nil || !w.claim.Val() {
			if w.read != nil {
				n++
			}
			continue
		}
		w.read = pipe.HMGet(ctx, w.d.name, bucketFields(w.head, 0, fleetRing)...)
		if s.opts.Rand() < 0.25 {
			// Now and then: keep the hash alive, and drop the buckets no
			// publication reads any more; any the fleet left for longer
			// go with the key.
			pipe.PExpire(ctx, w.d.name, s.opts.TTL)
			pipe.HDel(ctx, w.d.name, bucketFields(w.head, fleetRing, 3*fleetRing)...)
		}
		n++
	}
	if n == 0 {
		return nil
	}
	if pipe.Len() > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
	}
	pipe = s.rdb.Pipeline()
	for _, w := range work {
		if w.read == nil {
			continue
		}
		fields := make([]int64, 0, fleetRing)
		for _, v := range w.read.Val() {
			f, _ := v.(string)
			x, err := strconv.ParseInt(f, 10, 64)
			if err != nil || x < 0 {
				x = 0
			}
			fields = append(fields, x)
		}
		pipe.Publish(ctx, w.d.name, encodePublication(w.head, fields))
		w.d.mu.Lock()
		w.d.published = at
		w.d.mu.Unlock()
	}
	_, err := pipe.Exec(ctx)
	return err
}

// bucketFields names the hash fields of the buckets head−from down to
// head−to+1.
func bucketFields(head int64, from, to int) []string {
	out := make([]string, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, strconv.FormatInt(head-int64(i), 10))
	}
	return out
}

// listen hears the publications of every destination under the prefix
// on one pattern subscription, pinging it after listenIdle of silence
// and subscribing again, with backoff, when it fails.
func (s *ThrottleState) listen() {
	ps := s.rdb.PSubscribe(s.ctx, globEscape(s.prefix)+"{*")
	defer ps.Close()
	s.ps.Store(ps)
	if s.ctx.Err() != nil {
		// Closed before the subscription was stored.
		return
	}
	var backoff time.Duration
	for {
		msg, err := ps.ReceiveTimeout(s.ctx, listenIdle)
		if s.ctx.Err() != nil {
			return
		}
		var timeout interface{ Timeout() bool }
		switch {
		case err == nil:
			backoff = 0
		case errors.As(err, &timeout) && timeout.Timeout():
			_ = ps.Ping(s.ctx)
			continue
		default:
			backoff = min(max(2*backoff, 100*time.Millisecond), maxStateBackoff)
			if !s.sleep(backoff/2 + time.Duration(s.opts.Rand()*float64(backoff/2))) {
				return
			}
			continue
		}
		if m, ok := msg.(*redis.Message); ok {
			s.heard(m.Channel, m.Payload)
		}
	}
}

// heard takes a publication on channel as the fleet's counts of its
// destination. A malformed one is ignored.
func (s *ThrottleState) heard(channel, payload string) {
	key, ok := strings.CutPrefix(channel, s.prefix+"{")
	if !ok || !strings.HasSuffix(key, "}") {
		return
	}
	key = key[:len(key)-1]
	p, err := decodePublication(payload, s.opts.Clock.Now())
	if err != nil {
		return
	}
	if d := s.dest(key, true); d != nil {
		d.hear(p, s.opts.Stale)
	}
}

// globEscape escapes the characters a Redis pattern gives a meaning.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
