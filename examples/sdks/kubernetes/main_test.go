package main

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/examples/sdks/internal/fake"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	var buf bytes.Buffer
	if err := run(&buf); err != nil {
		t.Fatalf("run: %v", err)
	}
	if got, want := buf.String(), "pod default/web-0 is Running, after 3 requests\n"; got != want {
		t.Errorf("output = %q, want %q", got, want)
	}
}

// alwaysThrottled answers every request 429 with Retry-After: 0.
func alwaysThrottled(w http.ResponseWriter, _ *http.Request, _ int) {
	writeStatus(w, http.StatusTooManyRequests, "TooManyRequests", "0")
}

// Against an API server that always throttles, the rest client's own
// retries multiply httpretry's: 11 rest-client attempts of 3 httpretry
// attempts make 33 requests. With StripRetryAfter the rest client makes
// one call: 3 requests. A request built by hand with MaxRetries(0) gets
// the same bound without the wrapper.
func TestHitsBounded(t *testing.T) {
	transport := func(base http.RoundTripper) *httpretry.Transport {
		return &httpretry.Transport{Base: base, Budget: httpretry.Unlimited}
	}
	tests := []struct {
		name     string
		cfg      func(host string) *rest.Config
		get      func(ctx context.Context, core *rest.RESTClient) error
		wantHits int
	}{
		{
			name: "wrapped naively",
			cfg: func(host string) *rest.Config {
				return &rest.Config{Host: host, WrapTransport: func(base http.RoundTripper) http.RoundTripper {
					return transport(base)
				}}
			},
			get:      get,
			wantHits: 33,
		},
		{
			name:     "StripRetryAfter",
			cfg:      func(host string) *rest.Config { return newConfig(host, transport) },
			get:      get,
			wantHits: 3,
		},
		{
			name: "wrapped naively, MaxRetries(0) on a hand-built request",
			cfg: func(host string) *rest.Config {
				return &rest.Config{Host: host, WrapTransport: func(base http.RoundTripper) http.RoundTripper {
					return transport(base)
				}}
			},
			get: func(ctx context.Context, core *rest.RESTClient) error {
				return core.Get().Namespace("default").Resource("pods").Name("web-0").
					MaxRetries(0).Do(ctx).Error()
			},
			wantHits: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := fake.NewServer(alwaysThrottled)
			defer srv.Close()
			core, err := newCoreClient(tt.cfg(srv.URL))
			if err != nil {
				t.Fatal(err)
			}

			err = tt.get(context.Background(), core)
			if !apierrors.IsTooManyRequests(err) {
				t.Errorf("error = %v, want TooManyRequests", err)
			}
			if got := srv.Hits(); got != tt.wantHits {
				t.Errorf("server hits = %d, want %d", got, tt.wantHits)
			}
		})
	}
}

// get reads the pod with the rest client's default retries.
func get(ctx context.Context, core *rest.RESTClient) error {
	_, err := getPod(ctx, core, "default", "web-0")
	return err
}

// StripRetryAfter removes both hints and leaves everything else.
func TestStripRetryAfter(t *testing.T) {
	srv := fake.NewServer(func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Retry-After-Ms", "5")
		writeStatus(w, http.StatusServiceUnavailable, "ServiceUnavailable", "0")
	})
	defer srv.Close()
	tr := &httpretry.Transport{MaxAttempts: 1}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: StripRetryAfter{Transport: tr}}

	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("status = %d, want 503", resp.StatusCode)
	}
	for _, h := range []string{"Retry-After", "Retry-After-Ms"} {
		if v, ok := resp.Header[h]; ok {
			t.Errorf("%s = %q, want it removed", h, v)
		}
	}
	if got := resp.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q, want it kept", got)
	}
}
