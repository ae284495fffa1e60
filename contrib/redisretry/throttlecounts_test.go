package redisretry

import (
	"strings"
	"testing"
	"time"
)

// TestThrottleCountsPackedFieldsRoundTrip: a bucket's requests and
// accepts survive packing into one integer to 1/256 of a count, and
// HINCRBY's sum of packed fields is the packed sum.
func TestThrottleCountsPackedFieldsRoundTrip(t *testing.T) {
	t.Parallel()
	for _, c := range [][2]float64{{0, 0}, {1, 0}, {16, 16}, {1000.5, 3.25}, {5e6, 4e6}} {
		r, a := unpack(pack(c[0], c[1]))
		if r != c[0] || a != c[1] {
			t.Errorf("unpack(pack(%v, %v)) = %v, %v", c[0], c[1], r, a)
		}
	}
	r, a := unpack(pack(16, 0) + pack(32, 16) + pack(1.5, 1.5))
	if r != 49.5 || a != 17.5 {
		t.Errorf("sum of packed = %v requests, %v accepts; want 49.5, 17.5", r, a)
	}
	// Accepts never exceed requests, and never carry into them.
	if r, a := unpack(pack(2, 5)); r != 2 || a != 2 {
		t.Errorf("pack(2, 5) reads %v, %v; want 2, 2", r, a)
	}
}

// TestThrottleCountsMalformedPublicationsAreIgnored: what another
// program publishes on the channel is read only when it is a
// publication: a head and at most fleetRing non-negative integers.
func TestThrottleCountsMalformedPublicationsAreIgnored(t *testing.T) {
	t.Parallel()
	for name, msg := range map[string]string{
		"empty":     "",
		"text":      "hello world",
		"negative":  "100 -5",
		"float":     "100 1.5",
		"too long":  "100" + strings.Repeat(" 1", fleetRing+1),
		"head only": "x",
	} {
		if _, err := decodePublication(msg, time.Now()); err == nil {
			t.Errorf("%s: %q decoded without error", name, msg)
		}
	}
	if p, err := decodePublication("100 "+itoa(pack(3, 1)), time.Now()); err != nil || p.head != 100 || p.req[0] != 3 || p.acc[0] != 1 {
		t.Errorf("a publication decoded as %+v, %v", p, err)
	}
}

// TestThrottleCountsTakeSendsAShareScaledUp: a flush sends its pending
// counts with probability share × requests (an accept weighing as a
// failure), divided by it, so that the expected count sent is the count
// made; at share × requests ≥ 1 it sends them as they are.
func TestThrottleCountsTakeSendsAShareScaledUp(t *testing.T) {
	t.Parallel()
	d := &fleetDest{}
	d.add(7, 2, 1)
	if _, ok := d.take(9, 1.0/16, 1, 0.2); ok {
		t.Error("sent with a draw of 0.2 above 2/16")
	}
	if len(d.pending) != 0 {
		t.Error("counts not sent are kept; want them dropped (the share is scaled up instead)")
	}
	d.add(7, 2, 1)
	c, ok := d.take(9, 1.0/16, 1, 0.1)
	if !ok || c.b != 9 || c.req != 16 || c.acc != 8 {
		t.Errorf("take = %+v, %v; want bucket 9, 16 requests, 8 accepts", c, ok)
	}
	d.add(7, 40, 0)
	if c, ok := d.take(9, 1.0/16, 1, 0.99); !ok || c.req != 40 {
		t.Errorf("40 requests at share 1/16: take = %+v, %v; want all 40, unscaled", c, ok)
	}
}

// TestThrottleCountsOwnCountsAndFutureBucketsAreLeftOut: a process reads
// a publication without the counts it sent itself before it was heard
// (its own window holds them exactly), and without buckets more than a
// bucket ahead of its clock (a publisher whose clock is off); a
// publication older than stale adds nothing.
func TestThrottleCountsOwnCountsAndFutureBucketsAreLeftOut(t *testing.T) {
	t.Parallel()
	w := DefaultBucket
	now := time.Unix(1000, 0)
	head := bucketOf(now, w)
	d := &fleetDest{}
	d.sentAt([]cell{{b: head, req: 16, acc: 0}}, now.Add(-time.Millisecond), head-fleetRing)
	d.hear(publication{at: now, head: head, req: []float64{100, 50}, acc: []float64{0, 50}}, time.Second)
	req, acc := make([]float64, 50), make([]float64, 50)
	d.counts(now, w, w, time.Second, req, acc)
	if req[0] != 84 || req[1] != 50 || acc[1] != 50 {
		t.Errorf("counts: requests %v, accepts %v; want 84 (100 less its own 16) then 50 with 50 accepts", req[:2], acc[:2])
	}
	if !d.hotUntil.CompareAndSwap(now.Add(time.Second).UnixNano(), 0) {
		t.Error("a publication with requests not accepted did not make the destination hot until stale")
	}

	future := &fleetDest{}
	future.hear(publication{at: now, head: head + int64(time.Hour/w), req: []float64{500}, acc: []float64{0}}, time.Second)
	req = make([]float64, 50)
	future.counts(now, w, w, time.Second, req, acc)
	if req[0] != 0 {
		t.Errorf("a bucket an hour ahead counted %v requests; want none", req[0])
	}

	req = make([]float64, 50)
	d.counts(now.Add(2*time.Second), w, w, time.Second, req, acc)
	for i, r := range req {
		if r != 0 {
			t.Fatalf("a publication 2s old with stale 1s added %v requests at %d", r, i)
		}
	}
}

func itoa(v int64) string { return strings.TrimSpace(encodePublication(v, nil)) }
