package httpretry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-cleanhttp"
)

// staticBase is an in-memory Base that allocates nothing: it returns the
// same response every time, so a benchmark counts only the Transport's
// own allocations.
type staticBase struct{ resp http.Response }

func (s *staticBase) RoundTrip(*http.Request) (*http.Response, error) {
	s.resp.Body = http.NoBody
	return &s.resp, nil
}

func newStaticBase() *staticBase {
	return &staticBase{resp: http.Response{StatusCode: 200, Header: http.Header{}}}
}

// BenchmarkRoundTrip measures the Transport's overhead over an in-memory
// Base on the success path: "base" is the Base alone, the others wrap it.
func BenchmarkRoundTrip(b *testing.B) {
	req := httptest.NewRequest("GET", "http://api.test/books/b1", nil)
	cases := []struct {
		name string
		rt   func(http.RoundTripper) http.RoundTripper
	}{
		{"base", func(rt http.RoundTripper) http.RoundTripper { return rt }},
		{"default", func(rt http.RoundTripper) http.RoundTripper { return &Transport{Base: rt} }},
		{"attempt_timeout", func(rt http.RoundTripper) http.RoundTripper {
			return &Transport{Base: rt, AttemptTimeout: time.Second}
		}},
		{"timeout_and_attempt_timeout", func(rt http.RoundTripper) http.RoundTripper {
			return &Transport{Base: rt, Timeout: 2 * time.Second, AttemptTimeout: time.Second}
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			rt := c.rt(newStaticBase())
			b.ReportAllocs()
			for b.Loop() {
				resp, err := rt.RoundTrip(req)
				if err != nil || resp.StatusCode != 200 {
					b.Fatal(resp, err)
				}
				resp.Body.Close()
			}
		})
	}
}

// BenchmarkLoopback compares the bare pooled http.Transport with
// httpretry over it, on a loopback server, in one run.
func BenchmarkLoopback(b *testing.B) {
	body := strings.Repeat("b", 64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, body)
	}))
	defer srv.Close()
	for _, c := range []struct {
		name string
		rt   func() http.RoundTripper
	}{
		{"bare", func() http.RoundTripper { return cleanhttp.DefaultPooledTransport() }},
		{"httpretry", func() http.RoundTripper { return &Transport{Base: cleanhttp.DefaultPooledTransport()} }},
	} {
		b.Run(c.name, func(b *testing.B) {
			rt := c.rt()
			defer rt.(interface{ CloseIdleConnections() }).CloseIdleConnections()
			client := &http.Client{Transport: rt}
			req, _ := http.NewRequestWithContext(context.Background(), "GET", srv.URL, nil)
			b.ReportAllocs()
			for b.Loop() {
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				if n, _ := io.Copy(io.Discard, resp.Body); n != 64 {
					b.Fatalf("read %d bytes", n)
				}
				resp.Body.Close()
			}
		})
	}
}

// TestSuccessPathAllocations pins the benchmark's promise in a test: the
// default success path allocates nothing of its own.
func TestSuccessPathAllocations(t *testing.T) {
	req := httptest.NewRequest("GET", "http://api.test/", nil)
	for _, c := range []struct {
		name string
		tr   *Transport
		max  float64
	}{
		{"default", &Transport{Base: newStaticBase()}, 0},
		{"attempt timeout", &Transport{Base: newStaticBase(), AttemptTimeout: time.Second}, 8},
	} {
		allocs := testing.AllocsPerRun(200, func() {
			resp, err := c.tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		})
		if allocs > c.max {
			t.Errorf("%s: %v allocs per RoundTrip; want at most %v", c.name, allocs, c.max)
		}
	}
}
