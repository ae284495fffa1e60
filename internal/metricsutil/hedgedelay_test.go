package metricsutil

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/jonboulle/clockwork"
)

func TestHedgeCounts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                         string
		o                            httpretry.Outcome
		sent, won, canceled, refused int
	}{
		{"not hedged", httpretry.Outcome{Attempts: 2}, 0, 0, 0, 0},
		{"a hedge won", httpretry.Outcome{Attempts: 2, Hedges: 1, Winner: 2, HedgeWon: true, LosersCanceled: 1}, 1, 1, 1, 0},
		{"a retry won while a hedge ran", httpretry.Outcome{Attempts: 3, Hedges: 1, Winner: 2, LosersCanceled: 1}, 1, 0, 1, 0},
		{"the first attempt won", httpretry.Outcome{Attempts: 2, Hedges: 1, Winner: 1, LosersCanceled: 1}, 1, 0, 1, 0},
		{"refused, then the first won", httpretry.Outcome{Attempts: 1, HedgesRefused: 1, Winner: 1}, 0, 0, 0, 1},
		{"a retry after a failure, no hedge", httpretry.Outcome{Attempts: 2, Winner: 2}, 0, 0, 0, 0},
		{"no response", httpretry.Outcome{Attempts: 3, Hedges: 2, LosersCanceled: 0}, 2, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sent, won, canceled, refused := HedgeCounts(tt.o)
			if sent != tt.sent || won != tt.won || canceled != tt.canceled || refused != tt.refused {
				t.Errorf("HedgeCounts = %d, %d, %d, %d; want %d, %d, %d, %d", sent, won, canceled, refused, tt.sent, tt.won, tt.canceled, tt.refused)
			}
		})
	}
}

// delays returns what h.Each reports, key=delay, in order.
func delays(h *HedgeDelays) string {
	var parts []string
	h.Each(func(k string, d time.Duration) { parts = append(parts, k+"="+d.String()) })
	return strings.Join(parts, " ")
}

func TestHedgeDelaysKeys(t *testing.T) {
	t.Parallel()
	req := func(url string) *http.Request { return httptest.NewRequest("GET", url, nil) }
	fixed := &httpretry.Transport{Hedging: &httpretry.Hedging{Delay: 20 * time.Millisecond}}
	off := &httpretry.Transport{}

	h := NewHedgeDelays(2)
	h.Seen(req("http://a.test/x"))
	h.Watch(off)
	h.Seen(req("http://a.test/x"))
	if got := delays(h); got != "" {
		t.Fatalf("with no hedging Transport watched: %q, want nothing", got)
	}
	h.Watch(fixed)
	h.Watch(fixed) // once only
	for _, u := range []string{"http://b.test/1?token=s", "http://a.test/2", "http://a.test/3", "http://c.test/", "http://user:pw@b.test/4"} {
		h.Seen(req(u))
	}
	// At most two keys, the host each: c.test came third.
	if got, want := delays(h), "a.test=20ms b.test=20ms"; got != want {
		t.Errorf("delays = %q, want %q", got, want)
	}

	// A Key function names the keys; invalid ones are left out.
	routes := &httpretry.Transport{Hedging: &httpretry.Hedging{Delay: 5 * time.Millisecond, Key: func(r *http.Request) string {
		if r.URL.Path == "/bad" {
			return strings.Repeat("x", MaxRouteLen+1)
		}
		return "/books/{id}"
	}}}
	h2 := NewHedgeDelays(0)
	h2.Watch(routes)
	h2.Seen(req("http://a.test/books/1"))
	h2.Seen(req("http://a.test/bad"))
	if got, want := delays(h2), "/books/{id}=5ms"; got != want {
		t.Errorf("delays = %q, want %q", got, want)
	}

	var zero *HedgeDelays
	zero.Watch(fixed)
	zero.Seen(req("http://a.test/"))
	if got := delays(zero); got != "" {
		t.Errorf("nil HedgeDelays reports %q", got)
	}
}

// TestHedgeDelaysAdaptiveAbsentUntilKnown checks that a key whose adaptive
// delay is not known yet is not reported.
func TestHedgeDelaysAdaptiveAbsentUntilKnown(t *testing.T) {
	t.Parallel()
	h := NewHedgeDelays(0)
	h.Watch(&httpretry.Transport{Hedging: &httpretry.Hedging{}})
	h.Seen(httptest.NewRequest("GET", "http://a.test/", nil))
	if got := delays(h); got != "" {
		t.Errorf("delays = %q before any latency, want nothing", got)
	}
}

func TestHedgeDelaysSeenAllocatesNothingForAKnownKey(t *testing.T) {
	h := NewHedgeDelays(0)
	h.Watch(&httpretry.Transport{Hedging: &httpretry.Hedging{Delay: time.Millisecond}})
	req := httptest.NewRequest("GET", "http://a.test/", nil)
	h.Seen(req)
	if n := testing.AllocsPerRun(100, func() { h.Seen(req) }); n != 0 {
		t.Errorf("Seen of a known key: %v allocations, want 0", n)
	}
}

// TestHedgeDelaysReadsAHostUnderItsCanonicalSpelling: requests spelled
// "https://API.Example.com:443/" teach the adaptive delay under the host's
// canonical key, and the gauge reads it there: the host has a delay.
func TestHedgeDelaysReadsAHostUnderItsCanonicalSpelling(t *testing.T) {
	t.Parallel()
	base := roundTripper(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
	})
	// A fake clock that never moves: every latency learned is 0, so the
	// delay is the least there is (MinDelay, 1ms) however busy the machine.
	tr := &httpretry.Transport{Base: base, Clock: clockwork.NewFakeClock(), Hedging: &httpretry.Hedging{MinSamples: 10}}
	h := NewHedgeDelays(0)
	h.Watch(tr)
	for range 10 {
		req := httptest.NewRequest("GET", "https://API.Example.com:443/items", nil)
		h.Seen(req)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if got, want := delays(h), "api.example.com=1ms"; got != want {
		t.Errorf("delays = %q, want %q", got, want)
	}
}

// roundTripper is a function that is an http.RoundTripper.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
