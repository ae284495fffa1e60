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
	"github.com/httpretry/httpretry/throttle"
)

// staticBase is an in-memory Base that allocates nothing: it returns the
// same response every time, with body as its Body (http.NoBody when
// nil), so a benchmark counts only the Transport's own allocations.
type staticBase struct {
	resp http.Response
	body io.ReadCloser
}

func (s *staticBase) RoundTrip(*http.Request) (*http.Response, error) {
	s.resp.Body = http.NoBody
	if s.body != nil {
		s.resp.Body = s.body
	}
	return &s.resp, nil
}

// emptyBody is a response body that is not http.NoBody, so that the
// Transport wraps it as it wraps a body read from the network, and that
// allocates nothing.
type emptyBody struct{}

func (emptyBody) Read([]byte) (int, error) { return 0, io.EOF }
func (emptyBody) Close() error             { return nil }

// newStaticBase answers 200 with the headers a real response carries, so
// that header lookups cost what they cost in production.
func newStaticBase() *staticBase {
	return &staticBase{resp: http.Response{StatusCode: 200, Header: http.Header{
		"Content-Type":   {"application/json"},
		"Content-Length": {"64"},
		"Date":           {"Wed, 02 Dec 2026 12:00:00 GMT"},
	}}}
}

// newMemTransport returns an *http.Transport that answers "mem://" URLs
// in memory through a registered protocol: the Base a Transport knows
// cannot retry below it, without a network.
func newMemTransport() *http.Transport {
	t := &http.Transport{}
	t.RegisterProtocol("mem", newStaticBase())
	return t
}

// BenchmarkRoundTrip measures the Transport's overhead over an in-memory
// Base on the success path. Each "bare" case is the Base alone; the others
// wrap it. Over an *http.Transport the default path allocates nothing;
// over any other Base it marks the request's context so that an httpretry
// Transport below makes a single attempt (two allocations).
func BenchmarkRoundTrip(b *testing.B) {
	cases := []struct {
		name string
		url  string
		rt   func() http.RoundTripper
	}{
		{"http.Transport/bare", "mem://api.test/books/b1", func() http.RoundTripper { return newMemTransport() }},
		{"http.Transport/default", "mem://api.test/books/b1", func() http.RoundTripper {
			return &Transport{Base: newMemTransport()}
		}},
		{"http.Transport/attempt_timeout", "mem://api.test/books/b1", func() http.RoundTripper {
			return &Transport{Base: newMemTransport(), AttemptTimeout: time.Second}
		}},
		{"http.Transport/timeout_and_attempt_timeout", "mem://api.test/books/b1", func() http.RoundTripper {
			return &Transport{Base: newMemTransport(), Timeout: 2 * time.Second, AttemptTimeout: time.Second}
		}},
		{"http.Transport/throttle", "mem://api.test/books/b1", func() http.RoundTripper {
			return &Transport{Base: newMemTransport(), Throttle: &throttle.Throttle{}}
		}},
		{"http.Transport/on_attempt", "mem://api.test/books/b1", func() http.RoundTripper {
			return &Transport{Base: newMemTransport(), OnAttempt: func(*http.Request, Attempt) {}}
		}},
		{"http.Transport/idle_timeout", "mem://api.test/books/b1", func() http.RoundTripper {
			return &Transport{Base: newMemTransport(), IdleTimeout: time.Second}
		}},
		// Hedging on, no hedge fired: the answer comes long before the
		// delay (fixed 1s; adaptive, at its 1ms floor over in-memory
		// answers).
		{"http.Transport/hedging_fixed", "mem://api.test/books/b1", func() http.RoundTripper {
			return &Transport{Base: newMemTransport(), Hedging: &Hedging{Delay: time.Second}}
		}},
		{"http.Transport/hedging_adaptive", "mem://api.test/books/b1", func() http.RoundTripper {
			return &Transport{Base: newMemTransport(), Hedging: &Hedging{}}
		}},
		{"http.Transport/learned_attempt_timeout", "mem://api.test/books/b1", func() http.RoundTripper {
			return &Transport{Base: newMemTransport(), LearnAttemptTimeout: &LearnedTimeout{}}
		}},
		{"other/bare", "http://api.test/books/b1", func() http.RoundTripper { return newStaticBase() }},
		{"other/default", "http://api.test/books/b1", func() http.RoundTripper { return &Transport{Base: newStaticBase()} }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			rt := c.rt()
			req := httptest.NewRequest("GET", c.url, nil)
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

// hedgeNotFiredAllocs is the most allocations a hedged operation whose
// hedge never fires may make over the same operation unhedged, over an
// in-memory Base: the first attempt's request copy, allocated with the
// cancelable context it carries and the returned body's wrapper that
// releases it (withLazyCancel). No goroutine and no channel: the first
// attempt is sent on the caller's goroutine; the hedging state and its
// timer come from a pool (hedgedPool).
const hedgeNotFiredAllocs = 1

// TestHedgeNotFiredAllocationsOverUnhedged: with Hedging on and an answer
// long before the delay, an operation allocates at most
// hedgeNotFiredAllocs more than the same operation unhedged, over the
// same in-memory Base (the pair of BenchmarkRoundTrip's
// http.Transport/default and http.Transport/hedging_fixed).
//
// The returned body is wrapped, so that closing it releases the first
// attempt's context, unless it is http.NoBody (nothing to read: released
// at once): both are counted.
func TestHedgeNotFiredAllocationsOverUnhedged(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop the hedging state at random")
	}
	req := httptest.NewRequest("GET", "mem://api.test/", nil)
	perRun := func(tr *Transport) float64 {
		return testing.AllocsPerRun(200, func() {
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		})
	}
	for _, c := range []struct {
		name string
		body io.ReadCloser
	}{
		{"http.NoBody", nil},
		{"a body to read", emptyBody{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := func() *http.Transport {
				tr := &http.Transport{}
				tr.RegisterProtocol("mem", &staticBase{resp: newStaticBase().resp, body: c.body})
				return tr
			}
			unhedged := perRun(&Transport{Base: base()})
			hedged := perRun(&Transport{Base: base(), Hedging: &Hedging{Delay: time.Second}})
			if hedged-unhedged > hedgeNotFiredAllocs {
				t.Errorf("hedged, no hedge fired: %v allocs per RoundTrip, unhedged %v; want at most %d more", hedged, unhedged, hedgeNotFiredAllocs)
			}
		})
	}
}

// TestSuccessPathAllocations pins the benchmark's promises in a test: over
// an *http.Transport the default success path allocates nothing of its
// own; over another Base, at most the two allocations of the ownership
// mark.
func TestSuccessPathAllocations(t *testing.T) {
	for _, c := range []struct {
		name string
		tr   *Transport
		url  string
		max  float64
	}{
		{"default over http.Transport", &Transport{Base: newMemTransport()}, "mem://api.test/", 0},
		{"attempt timeout over http.Transport", &Transport{Base: newMemTransport(), AttemptTimeout: time.Second}, "mem://api.test/", 8},
		{"default over another Base", &Transport{Base: newStaticBase()}, "http://api.test/", 2},
		// A destination's throttle, quota and budget are found by its
		// host without allocating once it is known.
		{"throttle over http.Transport", &Transport{Base: newMemTransport(), Throttle: &throttle.Throttle{}}, "mem://api.test/", 0},
		{"throttle and budget per host over http.Transport", &Transport{Base: newMemTransport(), Throttle: &throttle.Throttle{}, BudgetPerHost: true}, "mem://api.test/", 0},
		// Hooks cost the connection trace's context and the attempt's
		// request copy; DNS and connect timings cost more, when asked for.
		{"hooks over http.Transport", &Transport{Base: newMemTransport(), OnAttempt: func(*http.Request, Attempt) {}, OnDone: func(*http.Request, Outcome) {}}, "mem://api.test/", 2},
		{"hooks and DialTrace over http.Transport", &Transport{Base: newMemTransport(), OnAttempt: func(*http.Request, Attempt) {}, DialTrace: true}, "mem://api.test/", 6},
		// A hedged operation sends its first attempt with a cancelable
		// context and a copy of the request, even when no hedge fires
		// (see TestHedgeNotFiredAllocationsOverUnhedged).
		{"hedging, no hedge fired", &Transport{Base: newMemTransport(), Hedging: &Hedging{Delay: time.Second}}, "mem://api.test/", hedgeNotFiredAllocs},
		// Latencies are recorded without allocating; the learned limit
		// costs what AttemptTimeout does.
		{"learned attempt timeout", &Transport{Base: newMemTransport(), LearnAttemptTimeout: &LearnedTimeout{}}, "mem://api.test/", 8},
	} {
		if raceEnabled && (c.tr.OnAttempt != nil || c.tr.Hedging != nil) {
			continue // the connection trace and the hedging state come from a sync.Pool, which the race detector drops at random
		}
		req := httptest.NewRequest("GET", c.url, nil)
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
