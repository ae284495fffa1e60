package httpretry

import (
	"context"
	"net/http"
	"testing"
	"time"
)

func TestAfterAttempt(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		f    hedgeFacts
		want hedgeAction
	}{
		{"a success wins over attempts in flight", hedgeFacts{stop: Final, inFlight: 2, mayStart: true}, hedgeWin},
		{"a final error wins too", hedgeFacts{stop: Final, inFlight: 1}, hedgeWin},
		{"a hedge's own final error leaves the others running", hedgeFacts{stop: Final, inFlight: 1, hedgeError: true, mayStart: true}, hedgeKeep},
		{"a hedge's own final error, the last one, ends it", hedgeFacts{stop: Final, hedgeError: true}, hedgeWin},
		{"the caller leaving ends it", hedgeFacts{stop: Canceled, inFlight: 2, mayStart: true}, hedgeWin},
		{"a 503 with others running starts the next at once", hedgeFacts{inFlight: 1, mayStart: true}, hedgeNow},
		{"a 503 when no more may start waits for the others", hedgeFacts{inFlight: 1}, hedgeKeep},
		{"a 409 in progress waits for the others", hedgeFacts{inFlight: 1, inProgress: true, mayStart: true}, hedgeKeep},
		{"attempts exhausted with others running waits", hedgeFacts{stop: AttemptsExhausted, inFlight: 1}, hedgeKeep},
		{"not repeatable with others running waits", hedgeFacts{stop: NotIdempotent, inFlight: 1, mayStart: true}, hedgeKeep},
		{"the last one, transient, retries", hedgeFacts{inFlight: 0, mayStart: true}, hedgeRetry},
		{"the last one, attempts exhausted, ends", hedgeFacts{stop: AttemptsExhausted}, hedgeWin},
		{"the last one, 409 in progress, retries after its wait", hedgeFacts{inProgress: true}, hedgeRetry},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := afterAttempt(c.f); got != c.want {
				t.Errorf("afterAttempt(%+v) = %d; want %d", c.f, got, c.want)
			}
		})
	}
}

// TestHedgeStops: only a hedge's own final error set aside while others
// run ends hedging for the operation.
func TestHedgeStops(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		f    hedgeFacts
		want bool
	}{
		{hedgeFacts{stop: Final, inFlight: 1, hedgeError: true}, true},
		{hedgeFacts{stop: Final, hedgeError: true}, false},
		{hedgeFacts{stop: Final, inFlight: 1}, false},
		{hedgeFacts{inFlight: 1, hedgeError: true}, false},
	} {
		if got := hedgeStops(c.f); got != c.want {
			t.Errorf("hedgeStops(%+v) = %v; want %v", c.f, got, c.want)
		}
	}
}

func TestMayStartHedge(t *testing.T) {
	t.Parallel()
	p := policy{maxAttempts: 3, minAttemptTime: 100 * ms}
	cases := []struct {
		name    string
		started int
		refused bool
		left    time.Duration
		bounded bool
		want    bool
	}{
		{"room for one more", 2, false, 0, false, true},
		{"max attempts started", 3, false, 0, false, false},
		{"a refusal stops hedging", 1, true, 0, false, false},
		{"MinAttemptTime left", 1, false, 100 * ms, true, true},
		{"less than MinAttemptTime left", 1, false, 99 * ms, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := mayStartHedge(p, c.started, c.refused, c.left, c.bounded); got != c.want {
				t.Errorf("mayStartHedge = %v; want %v", got, c.want)
			}
		})
	}
}

func TestHedgeSafe(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name                                           string
		idempotent, keyed, byMethod, dedup, rewindable bool
		want                                           bool
	}{
		{"GET", true, false, true, false, true, true},
		{"GET with a key", true, true, true, false, true, true},
		{"POST marked idempotent", true, false, true, false, true, true},
		{"POST with a key", true, true, false, false, true, false},
		{"POST with a key, server deduplicates", true, true, false, true, true, true},
		{"POST without a key", false, false, false, true, true, false},
		{"POST declared idempotent by Transport.Idempotent", true, false, false, false, true, true},
		{"GET whose body cannot be rewound", true, false, true, false, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := hedgeSafe(c.idempotent, c.keyed, c.byMethod, c.dedup, c.rewindable); got != c.want {
				t.Errorf("hedgeSafe = %v; want %v", got, c.want)
			}
		})
	}
}

// TestLatencySample: a good answer is a latency, an attempt cut by its
// limit is at least its elapsed time, a failure is none.
func TestLatencySample(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name                     string
		answered, timedOut       bool
		wantRecord, wantCensored bool
	}{
		{"an answer", true, false, true, false},
		{"cut by its limit: at least that long", false, true, true, true},
		{"a fast failure is excluded", false, false, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec, cen := latencySample(c.answered, c.timedOut)
			if rec != c.wantRecord || cen != c.wantCensored {
				t.Errorf("latencySample = %v, %v; want %v, %v", rec, cen, c.wantRecord, c.wantCensored)
			}
		})
	}
}

// TestGoodAnswer: only an answer that is not a failure, final or
// transient, is a latency: a final 503 or 429 comes back fast and says
// nothing of how long the work takes.
func TestGoodAnswer(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		status    int
		transient bool
		want      bool
	}{
		{200, false, true},
		{404, false, true},
		{409, true, false},
		{0, false, false},
		{503, true, false},
		{503, false, false},
		{500, false, false},
		{429, false, false},
		{529, false, false},
	} {
		if got := goodAnswer(c.status, c.transient); got != c.want {
			t.Errorf("goodAnswer(%d, transient %v) = %v; want %v", c.status, c.transient, got, c.want)
		}
	}
}

// TestFinalFailuresTeachNoLatency: 1,000 fast 503s with "X-Should-Retry:
// false" (final: what a server sends when its time budget is spent) are
// no latencies: the hedge delay stays unknown and no attempt limit is
// learned, so a healthy 40ms request later is neither hedged after 1ms
// nor cut at the 10ms floor.
func TestFinalFailuresTeachNoLatency(t *testing.T) {
	t.Parallel()
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp := response(req, 503, "spent")
		resp.Header.Set("X-Should-Retry", "false")
		return resp, nil
	})
	tr := &Transport{Base: base, Hedging: &Hedging{}, LearnAttemptTimeout: &LearnedTimeout{}}
	for range 1000 {
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "https://api.test/", nil))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if d, ok := tr.HedgeDelay("api.test"); ok {
		t.Errorf("after 1000 final 503s the hedge delay is %v; want none known", d)
	}
	if l := tr.latencies().Lookup("api.test").AttemptLimit(1); l != 0 {
		t.Errorf("after 1000 final 503s the learned attempt limit is %v; want none", l)
	}
}
