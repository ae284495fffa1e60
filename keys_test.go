package httpretry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/httpretry/httpretry/httptestutil"
)

func TestIsIdempotent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		method string
		header http.Header
		want   bool
	}{
		{"", nil, true},
		{"GET", nil, true},
		{"HEAD", nil, true},
		{"OPTIONS", nil, true},
		{"TRACE", nil, true},
		{"PUT", nil, true},
		{"DELETE", nil, true},
		{"POST", nil, false},
		{"PATCH", nil, false},
		{"CONNECT", nil, false},
		{"get", nil, false}, // methods are case-sensitive (RFC 9110 §9.1)
		{"POST", http.Header{"Idempotency-Key": {"k1"}}, true},
		{"PATCH", http.Header{"X-Idempotency-Key": {"k1"}}, true},
		{"POST", http.Header{"Idempotency-Key": nil}, true}, // net/http's rule: presence counts
		{"POST", http.Header{"Idempotency-Key-Extra": {"k"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+headerNames(tt.header), func(t *testing.T) {
			t.Parallel()
			req := &http.Request{Method: tt.method, Header: tt.header}
			if got := IsIdempotent(req); got != tt.want {
				t.Errorf("IsIdempotent(%s, %v) = %v; want %v", tt.method, tt.header, got, tt.want)
			}
		})
	}
	if IsIdempotent(nil) {
		t.Error("IsIdempotent(nil) = true; want false")
	}
}

func headerNames(h http.Header) string {
	s := ""
	for k := range h {
		s += k
	}
	return s
}

func TestRandomKey(t *testing.T) {
	t.Parallel()
	uuid4 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := make(map[string]bool)
	for range 1000 {
		k := RandomKey()
		if !uuid4.MatchString(k) {
			t.Fatalf("RandomKey() = %q; want a version 4 UUID", k)
		}
		if seen[k] {
			t.Fatalf("RandomKey() repeated %q", k)
		}
		seen[k] = true
	}
}

// TestIdempotentOptIn: WithIdempotent marks one request safe to repeat,
// leaving the client's other POSTs alone; AlwaysIdempotent marks all.
func TestIdempotentOptIn(t *testing.T) {
	t.Parallel()
	marked := httptest.NewRequest("POST", "http://search.test/_search", nil)
	marked = marked.WithContext(WithIdempotent(marked.Context()))
	plain := httptest.NewRequest("POST", "http://search.test/orders", nil)
	if !IsIdempotent(marked) || IsIdempotent(plain) {
		t.Errorf("IsIdempotent: marked %v, plain %v; want true, false", IsIdempotent(marked), IsIdempotent(plain))
	}
	if !AlwaysIdempotent(plain) || AlwaysIdempotent(nil) {
		t.Error("AlwaysIdempotent must hold for every request, and not for nil")
	}
	// Through a Transport: the marked POST is retried, the plain one not.
	for _, tc := range []struct {
		name     string
		tr       func(base http.RoundTripper) *Transport
		mark     bool
		wantHits int
	}{
		{"marked", func(b http.RoundTripper) *Transport { return &Transport{Base: b, Jitter: noJitter} }, true, 3},
		{"not marked", func(b http.RoundTripper) *Transport { return &Transport{Base: b, Jitter: noJitter} }, false, 1},
		{"AlwaysIdempotent", func(b http.RoundTripper) *Transport {
			return &Transport{Base: b, Jitter: noJitter, Idempotent: AlwaysIdempotent}
		}, false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base := httptestutil.NewTransport(nil, httptestutil.Step{Status: 503})
			ctx := context.Background()
			if tc.mark {
				ctx = WithIdempotent(ctx)
			}
			resp, err := tc.tr(base).RoundTrip(newRequest(t, ctx, "POST", "http://search.test/_search", strings.NewReader(`{"query":{}}`)))
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			if base.Hits() != tc.wantHits {
				t.Errorf("hits %d; want %d", base.Hits(), tc.wantHits)
			}
		})
	}
}
