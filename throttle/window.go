package throttle

import "time"

// This file holds the sliding window a destination's counts sit in.

// foldSpan is the time over which accepts counted while cold are spread
// when folded at now: since the last fold; before the first fold, since
// the first accept was counted (first, a stamp); with neither known,
// one bucket's width, as if just now. It is never longer than the ring:
// the accepts were counted without the clock, so when that time holds a
// quiet spell they may all have come after it, and spreading them over
// the spell would leave a burst that just came in next to nothing. An
// accept is taken as no older than the counts can reach back; the most
// this can overstate is pendingFold accepts, gone from the window one
// Window later.
func foldSpan(lastFold time.Time, first int64, now time.Time, width time.Duration) time.Duration {
	d := width
	if !lastFold.IsZero() {
		d = now.Sub(lastFold)
	} else if first != 0 {
		d = max(now.Sub(instant(first)), width)
	}
	return min(d, throttleRing*width)
}

func (th *Throttle) window() time.Duration {
	w := th.Window
	if w <= 0 {
		w = DefaultWindow
	}
	return max(w, minWindow)
}

// advance makes the head bucket the one holding now, clearing the buckets
// it passes (the whole ring at most). A now before the head bucket began
// (read before another caller advanced the window) moves nothing.
func (w *window) advance(now time.Time, width time.Duration) {
	if w.start.IsZero() {
		w.start = now
		return
	}
	n := max(now.Sub(w.start)/width, 0)
	for range min(n, throttleRing) {
		w.head = (w.head + 1) % throttleRing
		w.b[w.head] = bucket{}
	}
	w.start = w.start.Add(n * width)
}

// add counts requests and accepts in the head bucket.
func (w *window) add(req, acc float64) {
	w.b[w.head].req += req
	w.b[w.head].acc += acc
}

// spread counts n accepted requests made evenly over the last elapsed:
// the part that falls within the window, spread over the buckets it
// covers, up to the head. It returns what the head bucket got.
func (w *window) spread(n float64, elapsed, width time.Duration) (head float64) {
	span := width * throttleBuckets
	n *= float64(span) / float64(max(elapsed, span))
	elapsed = min(elapsed, span)
	k := min(max(int((elapsed+width-1)/width), 1), throttleBuckets)
	for i := range k {
		j := (w.head - i + throttleRing) % throttleRing
		w.b[j].req += n / float64(k)
		w.b[j].acc += n / float64(k)
	}
	return n / float64(k)
}

// counts returns the requests and accepts the throttle decides on, and
// how many buckets they cover: see countBack.
func (w *window) counts() (req, acc float64, n int) {
	return countBack(&w.b, w.head)
}

// bucket counts the requests and accepts of one stretch of time.
type bucket struct{ req, acc float64 }

// countBack sums the buckets of ring from head back: the newest
// throttleBuckets always, then older ones, one by one, while the sum
// holds fewer than throttleSamples requests, up to the whole ring. Past
// the window proper, once a bucket holds an accept (that one or a newer
// one), only accepts are summed, each as a request accepted: failures
// from before the server last accepted one say nothing of it now, but
// its accepts still weigh against newer failures. At a few requests a
// second the window holds one or two, and two failures in a row of an
// otherwise healthy destination are then weighed against the accepts
// before them; after an outage, the first accept leaves the failures
// before it out. It returns the sums and how many buckets they cover.
func countBack(ring *[throttleRing]bucket, head int) (req, acc float64, n int) {
	accepted := false
	for n < throttleRing && (n < throttleBuckets || req < throttleSamples) {
		b := ring[(head-n+throttleRing)%throttleRing]
		accepted = accepted || b.acc > 0
		if n >= throttleBuckets && accepted {
			b.req = b.acc
		}
		req, acc = req+b.req, acc+b.acc
		n++
	}
	return req, acc, n
}
