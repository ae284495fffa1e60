package idempotency_test

import (
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/httpretry/httpretry/idempotency"
)

// TestConflictThatAsksToRetryLaterIsNotRecorded: a 409 that carries a
// server's delay in any of the headers httpretry's Transport reads one
// from (Retry-After, Retry-After-Ms, X-Amz-Retry-After), as an upstream
// still running the same key answers, is no outcome: it is not recorded,
// and a retry with the same key runs the handler again. A 409 without
// one is the handler's own conflict: recorded, and replayed.
func TestConflictThatAsksToRetryLaterIsNotRecorded(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		header   string // set on the first run's 409; "" for none
		recorded bool
	}{
		{"Retry-After", false},
		{"Retry-After-Ms", false},
		{"X-Amz-Retry-After", false},
		{"", true},
	} {
		t.Run("409 with "+strconv.Quote(tt.header), func(t *testing.T) {
			t.Parallel()
			var runs atomic.Int32
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if runs.Add(1) == 1 {
					if tt.header != "" {
						w.Header().Set(tt.header, "1")
					}
					w.WriteHeader(http.StatusConflict)
					io.WriteString(w, "busy")
					return
				}
				w.WriteHeader(http.StatusCreated)
				io.WriteString(w, "created")
			})
			s := newServer(t, next, memory(), idempotency.Options{})
			expectStatus(t, "first", s.post(t, "k", "x"), http.StatusConflict)
			r := s.post(t, "k", "x")
			if tt.recorded {
				expectStatus(t, "retry", r, http.StatusConflict)
				if r.header.Get(idempotency.ReplayedHeader) != "true" || runs.Load() != 1 {
					t.Fatalf("retry: replayed %q after %d runs; want the recorded 409 replayed, 1 run", r.header.Get(idempotency.ReplayedHeader), runs.Load())
				}
				return
			}
			expectStatus(t, "retry", r, http.StatusCreated)
			if r.body != "created" || runs.Load() != 2 {
				t.Fatalf("retry: %q after %d runs; want the handler run again (2 runs)", r.body, runs.Load())
			}
		})
	}
}
