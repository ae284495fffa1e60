package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"

	openai "github.com/sashabaranov/go-openai"
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
	if got, want := buf.String(), "reply: \"Hi!\" after 2 requests\n"; got != want {
		t.Errorf("output = %q, want %q", got, want)
	}
}

// Which failed chat completions httpretry repeats: the API's word first,
// then the caller's opt-in for a POST the API said nothing about.
func TestChatCompletionRetries(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		shouldRetry string
		ctx         func(context.Context) context.Context
		idempotent  func(*http.Request) bool
		wantHits    int
		wantStatus  int // of the error; 0 for success
	}{
		{"500, x-should-retry true", 500, "true", nil, nil, 2, 0},
		{"429, x-should-retry false", 429, "false", nil, nil, 1, 429},
		{"502, no header: a POST is not repeated", 502, "", nil, nil, 1, 502},
		{"502, no header, WithIdempotent", 502, "", httpretry.WithIdempotent, nil, 2, 0},
		{"502, no header, AlwaysIdempotent", 502, "", nil, httpretry.AlwaysIdempotent, 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := fake.NewServer(func(w http.ResponseWriter, _ *http.Request, hit int) {
				if hit == 1 {
					apiError(w, tt.status, "server_error", tt.shouldRetry)
					return
				}
				writeCompletion(w, "Hi!")
			})
			defer srv.Close()
			tr := newTransport()
			tr.Idempotent = tt.idempotent
			defer tr.CloseIdleConnections()
			ctx := context.Background()
			if tt.ctx != nil {
				ctx = tt.ctx(ctx)
			}

			resp, err := newClient(srv.URL+"/v1", tr).CreateChatCompletion(ctx, newRequest())
			if tt.wantStatus == 0 {
				if err != nil {
					t.Fatalf("CreateChatCompletion: %v", err)
				}
				if got := resp.Choices[0].Message.Content; got != "Hi!" {
					t.Errorf("reply = %q, want %q", got, "Hi!")
				}
			} else {
				var apiErr *openai.APIError
				if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != tt.wantStatus {
					t.Fatalf("error = %v, want an *openai.APIError with status %d", err, tt.wantStatus)
				}
			}
			reqs := srv.Requests()
			if len(reqs) != tt.wantHits {
				t.Errorf("server hits = %d, want %d", len(reqs), tt.wantHits)
			}
			if !fake.SameBodies(reqs) || !bytes.Contains(reqs[0].Body, []byte(`"Say hi."`)) {
				t.Errorf("bodies differ across attempts or lack the prompt: %q", reqs[0].Body)
			}
			if reqs[0].Path != "/v1/chat/completions" {
				t.Errorf("path = %q, want /v1/chat/completions", reqs[0].Path)
			}
		})
	}
}
