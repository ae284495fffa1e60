package main

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"testing"

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
	if got, want := buf.String(), "search: status 200, titles [\"Release It!\"], after 2 requests\n"; got != want {
		t.Errorf("output = %q, want %q", got, want)
	}
}

// _search is a POST: repeated only with the opt-in.
func TestSearchRetriedOnlyWithOptIn(t *testing.T) {
	tests := []struct {
		name       string
		ctx        func(context.Context) context.Context
		idempotent func(*http.Request) bool
		wantHits   int
		wantStatus int
	}{
		{"no opt-in", nil, nil, 1, http.StatusServiceUnavailable},
		{"WithIdempotent on the call", httpretry.WithIdempotent, nil, 2, http.StatusOK},
		{"AlwaysIdempotent on the client", nil, httpretry.AlwaysIdempotent, 2, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := fake.NewServer(unavailableOnce)
			defer srv.Close()
			tr := &httpretry.Transport{Idempotent: tt.idempotent}
			defer tr.CloseIdleConnections()
			es, err := newClient(srv.URL, tr)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if tt.ctx != nil {
				ctx = tt.ctx(ctx)
			}

			titles, status, err := search(ctx, es)
			if err != nil {
				t.Fatalf("search: %v", err)
			}
			if status != tt.wantStatus {
				t.Errorf("status = %d, want %d", status, tt.wantStatus)
			}
			if status == http.StatusOK && !slices.Equal(titles, []string{"Release It!"}) {
				t.Errorf("titles = %q, want [Release It!]", titles)
			}
			reqs := srv.Requests()
			if len(reqs) != tt.wantHits {
				t.Errorf("server hits = %d, want %d", len(reqs), tt.wantHits)
			}
			for _, r := range reqs {
				if r.Method != http.MethodPost || r.Path != "/books/_search" || string(r.Body) != query {
					t.Errorf("request = %s %s %q, want POST /books/_search %q", r.Method, r.Path, r.Body, query)
				}
			}
		})
	}
}

// The client's own retries multiply httpretry's: against a node that is
// always unavailable, 4 client attempts (its default 3 retries) of 3
// httpretry attempts each make 12 requests; with DisableRetry, 3.
func TestClientRetriesMultiply(t *testing.T) {
	for _, tt := range []struct {
		disable  bool
		wantHits int
	}{{false, 12}, {true, 3}} {
		srv := fake.NewServer(func(w http.ResponseWriter, _ *http.Request, _ int) {
			w.Header().Set("X-Elastic-Product", "Elasticsearch")
			w.WriteHeader(http.StatusServiceUnavailable)
		})
		tr := &httpretry.Transport{Idempotent: httpretry.AlwaysIdempotent, Budget: httpretry.Unlimited}
		es, err := newClientRetrying(srv.URL, tr, !tt.disable)
		if err != nil {
			t.Fatal(err)
		}
		_, status, err := search(context.Background(), es)
		tr.CloseIdleConnections()
		srv.Close()
		if err != nil || status != http.StatusServiceUnavailable {
			t.Errorf("DisableRetry=%v: search = %d, %v; want 503", tt.disable, status, err)
		}
		if got := srv.Hits(); got != tt.wantHits {
			t.Errorf("DisableRetry=%v: server hits = %d, want %d", tt.disable, got, tt.wantHits)
		}
	}
}
