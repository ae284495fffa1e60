package httpretry

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/httpretry/httpretry/throttle"
)

// fiftyMinuteQuotaServer answers 200 with a quota of remaining requests that resets
// in 50 minutes, the count the server keeps.
func fiftyMinuteQuotaServer(remaining string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Ratelimit-Limit", "5000")
		w.Header().Set("X-Ratelimit-Remaining", remaining)
		w.Header().Set("X-Ratelimit-Reset", "3000")
	}))
}

// TestQuotaIsNotTakenByACallerThatAlreadyLeft: a destination announced 2
// requests left; 5 operations whose context was canceled before they
// started (an errgroup whose sibling failed) send nothing and take
// nothing from the quota, so the next live operation is sent.
func TestQuotaIsNotTakenByACallerThatAlreadyLeft(t *testing.T) {
	t.Parallel()
	srv := fiftyMinuteQuotaServer("2")
	defer srv.Close()
	client := &http.Client{Transport: &Transport{Base: srv.Client().Transport, MaxAttempts: 1,
		Throttle: drawing(&throttle.Throttle{}, func() float64 { return 1 })}}
	get := func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 5 {
		if err := get(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("canceled operation %d: %v; want context.Canceled", i, err)
		}
	}
	if err := get(context.Background()); err != nil {
		t.Errorf("the live operation after 5 canceled ones: %v; want it sent", err)
	}
}

// TestQuotaIsGivenBackByARefusedDial: a destination announced 2 requests
// left and then went away; 5 operations whose dial is refused never
// reached it, and each gives back what it took: none is refused for the
// quota (each fails with its dial error).
func TestQuotaIsGivenBackByARefusedDial(t *testing.T) {
	t.Parallel()
	srv := fiftyMinuteQuotaServer("2")
	client := &http.Client{Transport: &Transport{Base: srv.Client().Transport, MaxAttempts: 1,
		Throttle: drawing(&throttle.Throttle{}, func() float64 { return 1 })}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	srv.Close()
	for i := range 5 {
		_, err := client.Get(srv.URL)
		if errors.Is(err, throttle.ErrQuotaExhausted) {
			t.Fatalf("operation %d to a refused port: %v; want its dial error, the quota given back", i, err)
		}
		if err == nil {
			t.Fatalf("operation %d to a closed server succeeded", i)
		}
	}
}
