package main

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/examples/sdks/internal/fake"
)

var words = []string{"Streams ", "may ", "pause ", "between ", "tokens ", "without ", "being ", "cut."}

// A stream that keeps flowing, with gaps shorter than IdleTimeout, runs
// for longer than IdleTimeout and is delivered whole.
func TestStreamWithGapsSurvivesIdleTimeout(t *testing.T) {
	srv := fake.NewServer(sse{Words: words, Gap: 200 * time.Millisecond}.respond)
	defer srv.Close()
	tr := &httpretry.Transport{MaxAttempts: 4, IdleTimeout: time.Second}
	defer tr.CloseIdleConnections()

	start := time.Now()
	text, err := streamText(context.Background(), newClient(srv.URL, tr))
	if err != nil {
		t.Fatalf("stream error: %v", err)
	}
	if want := strings.Join(words, ""); text != want {
		t.Errorf("streamed text = %q, want %q", text, want)
	}
	// Seven gaps of 200ms: the stream outlived IdleTimeout.
	if d := time.Since(start); d < 1400*time.Millisecond {
		t.Errorf("stream took %v, want >= 1.4s (seven 200ms gaps)", d)
	}
	if got := srv.Hits(); got != 1 {
		t.Errorf("server hits = %d, want 1", got)
	}
}

// A stream that stalls after its headers fails with ErrIdleTimeout once
// IdleTimeout passes without a byte; the words already streamed are kept,
// and the request is not sent again (the response was already handed
// over).
func TestStalledStreamFails(t *testing.T) {
	srv := fake.NewServer(sse{Words: words, Gap: 10 * time.Millisecond, Stall: 2}.respond)
	defer srv.Close()
	const idle = 500 * time.Millisecond
	tr := &httpretry.Transport{MaxAttempts: 4, IdleTimeout: idle}
	defer tr.CloseIdleConnections()

	start := time.Now()
	text, err := streamText(context.Background(), newClient(srv.URL, tr))
	elapsed := time.Since(start)
	if !errors.Is(err, httpretry.ErrIdleTimeout) {
		t.Fatalf("stream error = %v, want one matching httpretry.ErrIdleTimeout", err)
	}
	var timeout interface{ Timeout() bool }
	if !errors.As(err, &timeout) || !timeout.Timeout() {
		t.Errorf("stream error %v: Timeout() is not true", err)
	}
	if want := strings.Join(words[:2], ""); text != want {
		t.Errorf("text before the stall = %q, want %q", text, want)
	}
	if elapsed < idle || elapsed > idle+2*time.Second {
		t.Errorf("stalled stream failed after %v, want between %v and %v", elapsed, idle, idle+2*time.Second)
	}
	if got := srv.Hits(); got != 1 {
		t.Errorf("server hits = %d, want 1", got)
	}
}

// A stream whose first attempt stalls before its headers is a transient
// failure; a POST is repeated only when the client says inference is safe
// to repeat (AlwaysIdempotent, or WithIdempotent per request).
func TestStallBeforeHeaders(t *testing.T) {
	tests := []struct {
		name       string
		idempotent func(*http.Request) bool
		wantHits   int
		wantErr    bool
	}{
		{"default: a POST is not repeated", nil, 1, true},
		{"AlwaysIdempotent: repeated", httpretry.AlwaysIdempotent, 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stream := sse{Words: words[:3]}
			srv := fake.NewServer(func(w http.ResponseWriter, r *http.Request, hit int) {
				if hit == 1 {
					fake.Hang(r)
					return
				}
				stream.respond(w, r, hit)
			})
			defer srv.Close()
			const idle = 300 * time.Millisecond
			tr := &httpretry.Transport{MaxAttempts: 4, IdleTimeout: idle, Idempotent: tt.idempotent}
			defer tr.CloseIdleConnections()

			start := time.Now()
			text, err := streamText(context.Background(), newClient(srv.URL, tr))
			if elapsed := time.Since(start); elapsed > 2*idle+2*time.Second {
				t.Errorf("call took %v, want at most %v", elapsed, 2*idle+2*time.Second)
			}
			if got := srv.Hits(); got != tt.wantHits {
				t.Errorf("server hits = %d, want %d", got, tt.wantHits)
			}
			if tt.wantErr {
				var e *httpretry.Error
				if !errors.As(err, &e) || e.Reason != httpretry.NotIdempotent {
					t.Errorf("error = %v, want an *httpretry.Error with reason not_idempotent", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("stream error: %v", err)
			}
			if want := strings.Join(words[:3], ""); text != want {
				t.Errorf("streamed text = %q, want %q", text, want)
			}
			if !fake.SameBodies(srv.Requests()) {
				t.Errorf("request bodies differ across attempts")
			}
		})
	}
}
