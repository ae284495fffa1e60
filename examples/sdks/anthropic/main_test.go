package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"go.uber.org/goleak"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/examples/sdks/internal/fake"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	var buf bytes.Buffer
	if err := run(&buf); err != nil {
		t.Fatalf("run: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("output has %d lines, want 5:\n%s", len(lines), buf.String())
	}
	for i, status := range []string{"529", "503", "429", "200"} {
		if !strings.HasPrefix(lines[i], "attempt ") || !strings.Contains(lines[i], "status "+status) {
			t.Errorf("line %d = %q, want attempt %d with status %s", i, lines[i], i+1, status)
		}
	}
	if want := `reply: "Hello!" after 4 requests`; lines[4] != want {
		t.Errorf("last line = %q, want %q", lines[4], want)
	}
}

// The scenario the API produces on a bad minute: 529, 503, then 429 with
// retry-after-ms: 800, each with x-should-retry: true, then the message.
// httpretry owns the retries (the SDK's are off): four requests, the
// third wait at least 800ms, the same body every time.
func TestMessagesCreateRetriedByHTTPRetryAlone(t *testing.T) {
	srv := fake.NewServer(overloadedThenOK)
	defer srv.Close()
	tr := newTransport()
	defer tr.CloseIdleConnections()
	var o httpretry.Outcome
	tr.OnDone = func(_ *http.Request, got httpretry.Outcome) { o = got }

	msg, err := newClient(srv.URL, tr).Messages.New(context.Background(), newParams())
	if err != nil {
		t.Fatalf("Messages.New: %v", err)
	}
	if got := msg.Content[0].Text; got != "Hello!" {
		t.Errorf("reply = %q, want %q", got, "Hello!")
	}
	reqs := srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("server hits = %d, want 4", len(reqs))
	}
	if o.Attempts != 4 || o.Reason != httpretry.Final || o.Status != http.StatusOK {
		t.Errorf("outcome = %d attempts, %s, status %d; want 4, final, 200", o.Attempts, o.Reason, o.Status)
	}
	t.Logf("server-side gaps between the four requests: %v", fake.Gaps(reqs))
	if gap := fake.Gaps(reqs)[2]; gap < 800*time.Millisecond {
		t.Errorf("wait after the 429 with retry-after-ms: 800 = %v, want >= 800ms", gap)
	}
	if !fake.SameBodies(reqs) {
		t.Errorf("request bodies differ across attempts")
	}
	if !bytes.Contains(reqs[0].Body, []byte(`"Say hello."`)) {
		t.Errorf("request body %q does not carry the prompt", reqs[0].Body)
	}
	for i, r := range reqs {
		if r.Method != http.MethodPost || r.Path != "/v1/messages" {
			t.Errorf("request %d = %s %s, want POST /v1/messages", i+1, r.Method, r.Path)
		}
		// The SDK numbers its own attempts; it made only one.
		if got := r.Header.Get("X-Stainless-Retry-Count"); got != "0" {
			t.Errorf("request %d: X-Stainless-Retry-Count = %q, want 0", i+1, got)
		}
		if _, ok := r.Header[httpretry.IdempotencyKeyHeader]; ok {
			t.Errorf("request %d carries an Idempotency-Key; none was configured", i+1)
		}
	}
}

// Retries at two layers multiply: the SDK's default 2 retries over
// httpretry's 3 attempts make 9 requests, and every SDK attempt is a new
// operation for httpretry, so a generated idempotency key changes three
// times. With the SDK's retries off, the same call makes 3 requests under
// one key.
func TestRetriesAtTwoLayersMultiply(t *testing.T) {
	alwaysOverloaded := func(w http.ResponseWriter, _ *http.Request, _ int) {
		apiError(w, statusOverloaded, "overloaded_error", "Overloaded",
			http.Header{"Retry-After-Ms": {"1"}})
	}
	tests := []struct {
		name      string
		sdkOpts   []option.RequestOption
		wantHits  int
		wantKeys  int
		wantCount []string // X-Stainless-Retry-Count of each request
	}{
		{"sdk retries on", nil, 9, 3, []string{"0", "0", "0", "1", "1", "1", "2", "2", "2"}},
		{"sdk retries off", []option.RequestOption{option.WithMaxRetries(0)}, 3, 1, []string{"0", "0", "0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := fake.NewServer(alwaysOverloaded)
			defer srv.Close()
			tr := &httpretry.Transport{
				MaxAttempts:       3,
				NewIdempotencyKey: httpretry.RandomKey,
				Budget:            httpretry.Unlimited,
				Jitter:            func(time.Duration) time.Duration { return 0 },
			}
			defer tr.CloseIdleConnections()
			opts := append([]option.RequestOption{
				option.WithAPIKey("sk-ant-test"),
				option.WithBaseURL(srv.URL),
				option.WithHTTPClient(&http.Client{Transport: tr}),
			}, tt.sdkOpts...)

			client := anthropic.NewClient(opts...)
			_, err := client.Messages.New(context.Background(), newParams())
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != statusOverloaded {
				t.Fatalf("Messages.New error = %v, want an *anthropic.Error with status 529", err)
			}
			reqs := srv.Requests()
			if len(reqs) != tt.wantHits {
				t.Errorf("server hits = %d, want %d", len(reqs), tt.wantHits)
			}
			if keys := fake.Distinct(reqs, httpretry.IdempotencyKeyHeader); len(keys) != tt.wantKeys || slices.Contains(keys, "") {
				t.Errorf("distinct idempotency keys = %q, want %d non-empty", keys, tt.wantKeys)
			}
			var counts []string
			for _, r := range reqs {
				counts = append(counts, r.Header.Get("X-Stainless-Retry-Count"))
			}
			if !slices.Equal(counts, tt.wantCount) {
				t.Errorf("X-Stainless-Retry-Count per request = %q, want %q", counts, tt.wantCount)
			}
			if !fake.SameBodies(reqs) {
				t.Errorf("request bodies differ across attempts")
			}
		})
	}
}

// The API's word is final: "x-should-retry: false" stops even a 529, and a
// 400 is never repeated.
func TestServerSaysNoRetry(t *testing.T) {
	tests := []struct {
		name   string
		status int
		typ    string
		header http.Header
	}{
		{"529 with x-should-retry false", statusOverloaded, "overloaded_error", http.Header{"X-Should-Retry": {"false"}}},
		{"400 invalid request", http.StatusBadRequest, "invalid_request_error", http.Header{"X-Should-Retry": {"false"}}},
		{"400 without the header", http.StatusBadRequest, "invalid_request_error", http.Header{"X-Should-Retry": nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := fake.NewServer(func(w http.ResponseWriter, _ *http.Request, _ int) {
				apiError(w, tt.status, tt.typ, "no", tt.header)
			})
			defer srv.Close()
			tr := newTransport()
			defer tr.CloseIdleConnections()

			_, err := newClient(srv.URL, tr).Messages.New(context.Background(), newParams())
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != tt.status {
				t.Fatalf("Messages.New error = %v, want an *anthropic.Error with status %d", err, tt.status)
			}
			if got := srv.Hits(); got != 1 {
				t.Errorf("server hits = %d, want 1", got)
			}
		})
	}
}
