package redisretry

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
)

// stepper drives one ThrottleState on a fake clock: each step adds
// counts of a destination and lets its flusher send them.
type stepper struct {
	t     *testing.T
	clk   *clockwork.FakeClock
	state *ThrottleState
	admin *redis.Client
	ctx   context.Context
}

// newStepper starts a ThrottleState sharing prefix with Share 1/24, on a
// fake clock, drawing 0.2 for every flush: a send whose chance is above
// 0.2 goes, one below it is dropped.
func newStepper(t *testing.T, prefix string) *stepper {
	t.Helper()
	srv, admin := server(t)
	clk := clockwork.NewFakeClockAt(time.Unix(1_700_000_000, 0))
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), DisableIdentity: true, Protocol: 2, MaxRetries: -1})
	st, err := NewThrottleState(rdb, prefix, ThrottleStateOptions{
		Share: 1.0 / 24, Clock: clk, Rand: func() float64 { return 0.2 },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		st.Close()
		rdb.Close()
	})
	eventually(t, "subscribed", func() bool { return subscribers(t, admin) == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return &stepper{t: t, clk: clk, state: st, admin: admin, ctx: ctx}
}

// step adds requests and accepts of key now, lets a FlushInterval pass,
// and returns once the flush that followed is over: the next step's
// flush waits on the clock only after it.
func (s *stepper) step(key string, requests, accepts float64) {
	s.t.Helper()
	s.state.Add(key, s.clk.Now(), requests, accepts)
	if err := s.clk.BlockUntilContext(s.ctx, 1); err != nil {
		s.t.Fatalf("the flusher never waited: %v", err)
	}
	s.clk.Advance(s.state.opts.FlushInterval)
}

// settle returns once the last step's flush is over: a count of
// another destination wakes the flusher, which waits on the clock for
// it only after that flush (if the flush has not taken the counts yet,
// it takes this one too: nothing to send).
func (s *stepper) settle() {
	s.t.Helper()
	s.state.Add("settle.example", s.clk.Now(), 0, 0)
	if err := s.clk.BlockUntilContext(s.ctx, 1); err != nil {
		s.t.Fatalf("the flusher never waited: %v", err)
	}
}

// stored returns the requests and accepts Redis holds for key, all
// buckets added up.
func (s *stepper) stored(key string) (req, acc float64) {
	s.t.Helper()
	h, err := s.admin.HGetAll(s.ctx, s.state.prefix+"{"+key+"}").Result()
	if err != nil {
		s.t.Fatal(err)
	}
	for _, v := range h {
		x, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			s.t.Fatalf("field %q: %v", v, err)
		}
		r, a := unpack(x)
		req, acc = req+r, acc+a
	}
	return req, acc
}

// TestThrottleStateSendsAcceptsMoreOftenWhileTheFleetFails: a fleet whose
// last window holds failures and no accept (an outage) has just healed.
// A process's accept is sent with eight times the chance of a failure
// (capped at 8, here 8/24), scaled down as much, so that the fleet learns
// of the heal from its first accepts and not from one in 24 of them;
// where the fleet's window holds as many accepts as failures, an accept
// is sent with a failure's chance (1/24) and dropped by the same draw.
func TestThrottleStateSendsAcceptsMoreOftenWhileTheFleetFails(t *testing.T) {
	t.Parallel()
	s := newStepper(t, "ts-rare")
	// The outage: 24 failures, sent for sure (24 × 1/24), published at
	// once (news), and heard back.
	s.step("down.example", 24, 0)
	eventually(t, "the outage heard", func() bool { return s.state.Hot("down.example") })
	// The heal: one accept, drawn 0.2 against 8/24.
	s.step("down.example", 1, 1)
	s.settle()
	if req, acc := s.stored("down.example"); req != 27 || acc != 3 {
		t.Errorf("after an outage, a process's first accept reached Redis as %v requests, %v accepts (24 failures before it); "+
			"want 27, 3: sent with chance 8/24 and scaled up by 24/8", req, acc)
	}

	// Half the fleet's counts accepted: an accept is no rarer than a
	// failure, and costs no more.
	s.step("half.example", 24, 12)
	eventually(t, "the half-failing destination heard", func() bool { return s.state.Hot("half.example") })
	s.step("half.example", 1, 1)
	s.settle()
	if req, acc := s.stored("half.example"); req != 24 || acc != 12 {
		t.Errorf("with half the fleet's counts accepted, an accept drawn 0.2 reached Redis (%v requests, %v accepts stored); "+
			"want it dropped: its chance is 1/24, a failure's", req, acc)
	}
}

// TestThrottleWeightOfAnAcceptIsTheFleetsFailuresPerAccept: an accept
// weighs the fleet's failures per accept over its last window, between
// 1 and 8: so the sends carry about as many accepts as failures, an
// accept is never sent less often than a failure, and a stale view of
// the fleet costs at most 8 times Share a count.
func TestThrottleWeightOfAnAcceptIsTheFleetsFailuresPerAccept(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name              string
		requests, accepts float64
		want              float64
	}{
		{"nothing heard", 0, 0, 1},
		{"an outage: failures, no accept", 600, 0, 8},
		{"the heal's first accepts: 1 in 20", 600, 30, 8},
		{"1 in 8: 7 failures per accept", 800, 100, 7},
		{"1 in 4: 3 failures per accept", 600, 150, 3},
		{"half accepted", 600, 300, 1},
		{"all accepted", 600, 600, 1},
		{"a NaN request count", math.NaN(), 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := acceptWeight(c.requests, c.accepts); got != c.want {
				t.Errorf("acceptWeight(%v, %v) = %v; want %v", c.requests, c.accepts, got, c.want)
			}
		})
	}
}

// TestThrottleWeightChanceOfASendWeighsEachAccept: a send's chance is
// Share times the failures plus each accept weighed, at most 1; with a
// weight of 1 it is Share times the requests, as for counts of one kind.
func TestThrottleWeightChanceOfASendWeighsEachAccept(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name                       string
		req, acc, share, weight, w float64
	}{
		{"a failure", 1, 0, 1.0 / 24, 8, 1.0 / 24},
		{"an accept weighed 8", 1, 1, 1.0 / 24, 8, 8.0 / 24},
		{"an accept weighed 1", 1, 1, 1.0 / 24, 1, 1.0 / 24},
		{"two failures and an accept weighed 3", 3, 1, 1.0 / 24, 3, 5.0 / 24},
		{"enough counts: sent as they are", 30, 10, 1.0 / 24, 2, 1},
		{"accepts beyond the requests count as requests", 1, 5, 1.0 / 24, 8, 8.0 / 24},
		{"nothing", 0, 0, 1.0 / 24, 8, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := sendChance(c.req, c.acc, c.share, c.weight); math.Abs(got-c.w) > 1e-12 {
				t.Errorf("sendChance(%v, %v, %v, %v) = %v; want %v", c.req, c.acc, c.share, c.weight, got, c.w)
			}
		})
	}
}

// TestThrottleWeightReadsTheLastWindowOfAFreshPublication: the weight
// reads the publication's buckets of the throttle's last window (600ms,
// ten 60ms buckets), not the older ones a publication carries, and a
// publication older than Stale, or none, weighs nothing.
func TestThrottleWeightReadsTheLastWindowOfAFreshPublication(t *testing.T) {
	t.Parallel()
	w := DefaultBucket
	now := time.Unix(1000, 0)
	head := bucketOf(now, w)
	req, acc := make([]float64, fleetRing), make([]float64, fleetRing)
	// The last window: 500 requests, 100 accepts (4 failures per
	// accept). The buckets before it: accepts only, which must not
	// count.
	for i := range 10 {
		req[i], acc[i] = 50, 10
	}
	for i := 10; i < fleetRing; i++ {
		req[i], acc[i] = 100, 100
	}
	d := &fleetDest{}
	if got := d.acceptWeight(now, w, DefaultStale); got != 1 {
		t.Errorf("no publication heard: weight %v; want 1", got)
	}
	d.hear(publication{at: now, head: head, req: req, acc: acc}, DefaultStale)
	if got := d.acceptWeight(now, w, DefaultStale); got != 4 {
		t.Errorf("weight %v; want 4 (500 requests, 100 accepts in the last ten buckets)", got)
	}
	if got := d.acceptWeight(now.Add(DefaultStale+time.Millisecond), w, DefaultStale); got != 1 {
		t.Errorf("a stale publication: weight %v; want 1", got)
	}
}

// TestThrottleWeightCostsAtMostTwiceShareACount: over a fleet whose
// share a of counts are accepts, each count flushed alone, an accept
// weighed as the fleet's counts say costs (1 − a)·Share + a·w·Share
// commands a count: at most twice Share whatever a, Share in an outage
// (a = 0) and once accepts are at least half.
func TestThrottleWeightCostsAtMostTwiceShareACount(t *testing.T) {
	t.Parallel()
	const share = 1.0 / 24
	for i := 0; i <= 100; i++ {
		a := float64(i) / 100
		w := acceptWeight(1000, 1000*a)
		cost := (1-a)*sendChance(1, 0, share, w) + a*sendChance(1, 1, share, w)
		if cost > 2*share+1e-12 {
			t.Errorf("a = %.2f: weight %v, %.4f commands a count; want at most 2 × Share = %.4f", a, w, cost, 2*share)
		}
		if (a == 0 || a >= 0.5) && math.Abs(cost-share) > 1e-12 {
			t.Errorf("a = %.2f: %.4f commands a count; want Share, %.4f", a, cost, share)
		}
	}
}

// TestThrottleWeightOfAnAcceptStaysWithinItsBoundsWhateverTheCounts: the
// weight of an accept is a number in [1, 8] whatever counts it is given,
// infinite or not a number included: a weight outside it (NaN) makes
// every send's chance NaN, so counts are never sent.
func TestThrottleWeightOfAnAcceptStaysWithinItsBoundsWhateverTheCounts(t *testing.T) {
	t.Parallel()
	inf, nan := math.Inf(1), math.NaN()
	for _, c := range []struct {
		name              string
		requests, accepts float64
	}{
		{"infinite requests and accepts", inf, inf},
		{"infinite requests", inf, 5},
		{"infinite accepts", 5, inf},
		{"NaN accepts", 600, nan},
		{"negative accepts", 600, -1},
		{"negative requests", -600, 1},
		{"negative infinite requests", math.Inf(-1), math.Inf(-1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := acceptWeight(c.requests, c.accepts)
			if !(got >= 1 && got <= maxAcceptWeight) {
				t.Errorf("acceptWeight(%v, %v) = %v; want a weight in [1, %d]", c.requests, c.accepts, got, maxAcceptWeight)
			}
			if q := sendChance(1, 1, 1.0/24, got); !(q > 0) {
				t.Errorf("with that weight an accept's chance of a send is %v; want above 0", q)
			}
		})
	}
}

// TestThrottleWeightReadsTheLastWindowWhateverTheBucketWidth: with
// buckets wider than the throttle's window (a fleet's Bucket of 1s), the
// fleet's last window lies in the bucket now fills, however long ago it
// began: an accept weighs that bucket's failures per accept at every
// moment of the bucket, not only in its first 600ms.
func TestThrottleWeightReadsTheLastWindowWhateverTheBucketWidth(t *testing.T) {
	t.Parallel()
	const w = time.Second
	start := time.Unix(1000, 0)
	req, acc := make([]float64, fleetRing), make([]float64, fleetRing)
	for i := range fleetRing {
		req[i], acc[i] = 100, 1 // 99 failures per accept in every bucket
	}
	for _, into := range []time.Duration{0, 300 * time.Millisecond, 600 * time.Millisecond, 900 * time.Millisecond} {
		now := start.Add(into)
		d := &fleetDest{}
		d.hear(publication{at: now, head: bucketOf(now, w), req: req, acc: acc}, DefaultStale)
		if got := d.acceptWeight(now, w, DefaultStale); got != maxAcceptWeight {
			t.Errorf("%v into a 1s bucket of 99 failures per accept, just published: weight %v; want %d", into, got, maxAcceptWeight)
		}
	}
}
