package httpretry

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// TestTransientRunsOncePerAttempt: three attempts that each get a 503
// ask the Transient hook three times, once per attempt, whether the
// Transport hedges (with no hedge ever sent), learns attempt limits, or
// neither: the rules, the latency estimate and the report read the one
// answer.
func TestTransientRunsOncePerAttempt(t *testing.T) {
	t.Parallel()
	noWait := func(time.Duration) time.Duration { return 0 }
	for _, tt := range []struct {
		name          string
		hedging       *Hedging
		learnedLimits *LearnedTimeout
	}{
		{"sequential", nil, nil},
		{"hedging, no hedge sent", &Hedging{Delay: time.Hour}, nil},
		{"adaptive hedging, no latency known", &Hedging{}, nil},
		{"learned attempt limit", nil, &LearnedTimeout{}},
		{"both", &Hedging{Delay: time.Hour}, &LearnedTimeout{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int32
			tr := &Transport{Hedging: tt.hedging, LearnAttemptTimeout: tt.learnedLimits}
			tr.Base = roundTripFunc(func(req *http.Request) (*http.Response, error) { return response(req, 503, "busy"), nil })
			tr.MaxAttempts, tr.Jitter = 3, noWait
			tr.Transient = func(resp *http.Response, err error) bool {
				calls.Add(1)
				return IsTransient(resp, err)
			}
			var o Outcome
			resp, err := tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", "https://api.test/", nil))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if o.Attempts != 3 || calls.Load() != 3 {
				t.Errorf("%d attempts, Transient called %d times; want 3 and 3", o.Attempts, calls.Load())
			}
		})
	}
}
