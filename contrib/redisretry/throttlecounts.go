package redisretry

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// This file holds a ThrottleState's counts of one destination in the
// process: the counts waiting to be sent, the process's own counts sent
// lately, and the fleet's last publication, and how they are read.

// fleetRing is how many buckets a publication carries, the newest first:
// as many as the throttle keeps.
const fleetRing = 50

// countUnit is the fraction of a count that Redis holds: counts scaled
// up by the inverse of a share are rarely whole.
const countUnit = 256

// accBits is where a packed field's requests start: its accepts take the
// bits below (up to 2^31/256, eight million a bucket), its requests the
// 32 above.
const accBits = 31

// fleetDest is a ThrottleState's state of one destination.
type fleetDest struct {
	name     string       // the hash's key and the channel's name
	hotUntil atomic.Int64 // UnixNano until which the fleet holds the destination hot

	mu        sync.Mutex // protects the fields below
	pending   []cell     // counts not yet sent, by bucket
	sent      []sentCell // the process's own counts sent lately
	pub       publication
	published time.Time // when this process last published
}

// cell is counts of one bucket.
type cell struct {
	b        int64 // the bucket's number
	req, acc float64
}

// sentCell is counts the process sent, and when Redis acknowledged them.
type sentCell struct {
	cell
	at time.Time
}

// publication is the fleet's counts of the newest buckets as one process
// read and published them, heard at at.
type publication struct {
	at       time.Time
	head     int64 // the number of the newest bucket: req[i] is bucket head−i
	req, acc []float64
}

// add counts requests and accepts in bucket b, to be sent.
func (d *fleetDest) add(b int64, req, acc float64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range d.pending {
		if d.pending[i].b == b {
			d.pending[i].req += req
			d.pending[i].acc += acc
			return
		}
	}
	d.pending = append(d.pending, cell{b: b, req: req, acc: acc})
}

// take returns the pending counts to send as one cell of bucket b, the
// bucket of the flush, and clears them: with the probability sendChance
// gives them (share, each accept weighing weight failures), divided by
// that probability, else none. draw is a number in [0, 1). Counts made
// over one flush interval go to one bucket, so that a send is one
// command.
func (d *fleetDest) take(b int64, share, weight, draw float64) (cell, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := cell{b: b}
	for _, p := range d.pending {
		c.req += p.req
		c.acc += p.acc
	}
	d.pending = d.pending[:0]
	q := sendChance(c.req, c.acc, share, weight)
	if !(draw < q) {
		return cell{}, false
	}
	c.req /= q
	c.acc /= q
	return c, true
}

// sentAt remembers cells as sent, acknowledged at at, and forgets the
// cells no publication can hold any more.
func (d *fleetDest) sentAt(cells []cell, at time.Time, oldest int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	keep := d.sent[:0]
	for _, c := range d.sent {
		if c.b >= oldest {
			keep = append(keep, c)
		}
	}
	for _, c := range cells {
		keep = append(keep, sentCell{cell: c, at: at})
	}
	d.sent = keep
}

// broadcastDue reports whether this process should read and publish the
// fleet's counts at now: nobody published for every.
func (d *fleetDest) broadcastDue(now time.Time, every time.Duration) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	last := d.pub.at
	if d.published.After(last) {
		last = d.published
	}
	return now.Sub(last) >= every
}

// hear takes p as the fleet's counts, heard at p.at: the destination is
// hot in the fleet until stale after it when they hold a request not
// accepted.
func (d *fleetDest) hear(p publication, stale time.Duration) {
	d.mu.Lock()
	d.pub = p
	d.mu.Unlock()
	hot := false
	for i := range p.req {
		if p.req[i]-p.acc[i] >= 0.5 {
			hot = true
			break
		}
	}
	if hot {
		d.hotUntil.Store(p.at.Add(stale).UnixNano())
	} else {
		d.hotUntil.Store(0)
	}
}

// counts adds the last publication's counts, without the process's own
// counts it held, into requests and accepts by age at now in buckets of
// width: nothing when the publication is older than stale. The fleet's
// bucket b (of bucket width w) falls at index (now − b·w)/width; a
// bucket ahead of now by more than w falls nowhere.
func (d *fleetDest) counts(now time.Time, w, width, stale time.Duration, requests, accepts []float64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := &d.pub
	if p.at.IsZero() || now.Sub(p.at) > stale {
		return
	}
	for i := range p.req {
		b := p.head - int64(i)
		req, acc := p.req[i], p.acc[i]
		for _, c := range d.sent {
			if c.b == b && !c.at.After(p.at) {
				req -= c.req
				acc -= c.acc
			}
		}
		age := now.UnixNano() - b*int64(w)
		if age < -int64(w) {
			// A bucket more than one bucket ahead of this process's
			// clock: a publisher whose clock is off, not the present.
			continue
		}
		j := max(age/int64(width), 0)
		if j >= int64(len(requests)) || req <= 0 {
			continue
		}
		requests[j] += req
		accepts[j] += min(max(acc, 0), req)
	}
}

// pack is a bucket's counts as one integer field: HINCRBY adds them
// both at once.
func pack(req, acc float64) int64 {
	r := int64(math.Round(min(req, 1<<(63-accBits-9)) * countUnit))
	a := int64(math.Round(min(acc, req, 1<<(accBits-9)) * countUnit))
	return r<<accBits | a
}

// unpack is pack's inverse.
func unpack(v int64) (req, acc float64) {
	return float64(v>>accBits) / countUnit, float64(v&(1<<accBits-1)) / countUnit
}

// encodePublication writes the packed fields of the buckets from head
// back as a message: head, then one packed field per bucket.
func encodePublication(head int64, fields []int64) string {
	var b strings.Builder
	b.WriteString(strconv.FormatInt(head, 10))
	for _, f := range fields {
		b.WriteByte(' ')
		b.WriteString(strconv.FormatInt(f, 10))
	}
	return b.String()
}

// errBadPublication is the error of a message that is no publication.
var errBadPublication = errors.New("redisretry: malformed throttle publication")

// decodePublication reads a message encodePublication wrote, heard at
// at. It refuses more than fleetRing buckets and anything that is not a
// non-negative integer.
func decodePublication(msg string, at time.Time) (publication, error) {
	parts := strings.Fields(msg)
	if len(parts) < 1 || len(parts) > fleetRing+1 {
		return publication{}, errBadPublication
	}
	head, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil {
		return publication{}, errBadPublication
	}
	p := publication{at: at, head: head, req: make([]float64, len(parts)-1), acc: make([]float64, len(parts)-1)}
	for i, s := range parts[1:] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			return publication{}, errBadPublication
		}
		p.req[i], p.acc[i] = unpack(v)
	}
	return p, nil
}

// quiet reports whether d has been quiet for stale at now: not held hot,
// no counts pending, and nothing heard or published for stale.
func (d *fleetDest) quiet(now time.Time, stale time.Duration) bool {
	if d.hotUntil.Load() > now.UnixNano() {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.pending) == 0 && now.Sub(d.pub.at) >= stale && now.Sub(d.published) >= stale
}
