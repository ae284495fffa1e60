package httpretry

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/httpretry/httpretry/throttle"
)

// TestQuotaReadAgainWhenFieldsAppear: a destination that sent no
// rate-limit fields for quotaMisses responses, then starts to (with none
// left), is read again from a sample of its responses, before any 429:
// its operations are then refused locally.
func TestQuotaReadAgainWhenFieldsAppear(t *testing.T) {
	t.Parallel()
	// The throttle reads 16 responses in a row without fields, then
	// samples one at each fold of 64 accepts.
	const quotaMisses, pendingFold = 16, 64
	var n atomic.Int64
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		h := http.Header{}
		if n.Add(1) > quotaMisses {
			h.Set("X-RateLimit-Remaining", "0")
			h.Set("X-RateLimit-Reset", "60")
		}
		return &http.Response{StatusCode: 200, Header: h, Body: http.NoBody, Request: r}, nil
	})
	tr := &Transport{Base: base, MaxAttempts: 1, Throttle: &throttle.Throttle{Rand: admitAll}}
	for i := range quotaMisses + 2*pendingFold {
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
		if errors.Is(err, throttle.ErrQuotaExhausted) {
			return
		}
		if err != nil {
			t.Fatalf("operation %d: %v", i+1, err)
		}
		resp.Body.Close()
	}
	t.Errorf("%d operations, the last %d answered with X-RateLimit-Remaining: 0: none refused; want the fields read again within %d responses", quotaMisses+2*pendingFold, 2*pendingFold, pendingFold)
}
