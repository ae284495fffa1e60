package spread_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/httpretry/httpretry/spread"
	"github.com/httpretry/httpretry/spread/spreadtest"
)

// everyBackendAnswers sends n requests and fails the test unless every
// backend got at least one: none is ejected.
func everyBackendAnswers(t *testing.T, rt http.RoundTripper, g *spreadtest.Group, n int) {
	t.Helper()
	before := make([]int64, len(g.Backends))
	for i, b := range g.Backends {
		before[i] = b.Requests.Load()
	}
	for i := range n {
		if _, _, err := getOp(t, rt, g, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i, b := range g.Backends {
		if b.Requests.Load() == before[i] {
			t.Errorf("backend %d got none of %d requests: it was ejected", i, n)
		}
	}
}

// expiring is a context whose deadline the test ends when it chooses:
// after the headers came, whatever the machine's load.
type expiring struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func newExpiring() *expiring {
	return &expiring{Context: context.Background(), done: make(chan struct{})}
}

func (e *expiring) expire()                     { e.once.Do(func() { close(e.done) }) }
func (e *expiring) Done() <-chan struct{}       { return e.done }
func (e *expiring) Deadline() (time.Time, bool) { return time.Time{}, false }
func (e *expiring) Err() error {
	select {
	case <-e.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// TestRequestRefusedBeforeAConnectionDoesNotCountAgainstTheAddress: a
// caller's requests that net/http refuses before asking for a connection
// (an invalid header value) fail, and eject no address: one caller's bad
// input does not move every caller's traffic.
func TestRequestRefusedBeforeAConnectionDoesNotCountAgainstTheAddress(t *testing.T) {
	g := startGroup(t, spreadtest.Options{})
	sp := newSpread(t, g)
	sp.Clock, sp.EjectAfter = clockwork.NewFakeClock(), 2
	for range 12 {
		req, _ := http.NewRequest(http.MethodGet, g.URL, nil)
		req.Header.Set("X-Bad", "a\nb")
		if _, err := sp.RoundTrip(req); err == nil {
			t.Fatal("a request with an invalid header was sent")
		}
	}
	everyBackendAnswers(t, sp, g, 200)
}

// TestBodyCutByTheCallersDeadlineDoesNotCountAgainstTheAddress: a caller
// whose deadline ends while it reads the body (a slow reader looks, from
// the client, like a server that stalls mid-body) ejects no address. A
// stall before the response's headers does count.
func TestBodyCutByTheCallersDeadlineDoesNotCountAgainstTheAddress(t *testing.T) {
	g := startGroup(t, spreadtest.Options{Slow: 10 * time.Second})
	for _, b := range g.Backends {
		b.Set(spreadtest.Trickle)
	}
	sp := newSpread(t, g)
	sp.Clock, sp.EjectAfter = clockwork.NewFakeClock(), 2
	// Twelve requests over four addresses: some address gets three, more
	// than EjectAfter.
	for i := range 12 {
		ctx := newExpiring()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.URL, nil)
		resp, err := sp.RoundTrip(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		buf := make([]byte, 1)
		if _, err := resp.Body.Read(buf); err != nil {
			t.Fatalf("request %d: first byte: %v", i, err)
		}
		ctx.expire()
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("request %d: read ended with %v, want the deadline", i, err)
		}
	}
	for _, b := range g.Backends {
		b.Set(spreadtest.Answer)
	}
	everyBackendAnswers(t, sp, g, 200)
}

// TestEveryAddressFailingStillSendsAndEjectsAtMostTheShare: when every
// backend resets, requests still go out and fail with the reset, never
// with "no address", and at most half the addresses are ejected: the
// requests keep reaching at least two backends.
func TestEveryAddressFailingStillSendsAndEjectsAtMostTheShare(t *testing.T) {
	g := startGroup(t, spreadtest.Options{})
	for _, b := range g.Backends {
		b.Set(spreadtest.Reset)
	}
	sp := newSpread(t, g)
	sp.Clock, sp.EjectAfter = clockwork.NewFakeClock(), 1
	for i := range 20 {
		if _, _, err := getOp(t, sp, g, fmt.Sprint(i)); err == nil {
			t.Fatalf("request %d succeeded against backends that reset", i)
		}
	}
	before := make([]int64, 4)
	for i, b := range g.Backends {
		before[i] = b.Requests.Load()
	}
	for i := range 40 {
		getOp(t, sp, g, fmt.Sprint(i))
	}
	reached := 0
	for i, b := range g.Backends {
		if b.Requests.Load() > before[i] {
			reached++
		}
	}
	if reached < 2 {
		t.Fatalf("40 requests reached %d backends, want at least the 2 that may not be ejected", reached)
	}
}

// TestAddressThatLeftDNSWithARequestInFlightClosesItsConnection: the
// answer loses an address while a request to it runs; the request
// finishes, no request goes to it once the answer is applied, and its
// connection is closed rather than left idle in a
// Transport no request will use: over HTTP/1.1 as soon as it is idle,
// over HTTP/2 by the host's next requests (an HTTP/2 connection finishes
// its stream after the body is closed, on net/http's goroutine), with no
// goroutine of spread's own.
func TestAddressThatLeftDNSWithARequestInFlightClosesItsConnection(t *testing.T) {
	for _, tls := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", tls), func(t *testing.T) {
			g := startGroup(t, spreadtest.Options{TLS: tls, Slow: 300 * time.Millisecond})
			leaving := g.Backends[3]
			leaving.Set(spreadtest.Slow)
			g.Resolver.Set(leaving.Addr)
			fc := clockwork.NewFakeClock()
			sp := newSpread(t, g)
			sp.Clock = fc
			done := make(chan error, 1)
			go func() {
				_, _, err := getOp(t, sp, g, "in flight")
				done <- err
			}()
			waitFor(t, "the request to reach the leaving backend", func() bool { return leaving.Requests.Load() == 1 })
			g.Resolver.Set(g.Addrs()[:3]...)
			fc.Advance(time.Minute)
			// The request that finds the answer due goes on with the
			// addresses known, the leaving one included.
			if _, _, err := getOp(t, sp, g, "refresh"); err != nil {
				t.Fatal(err)
			}
			spread.WaitLookups(sp)
			before := leaving.Requests.Load()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			i := 0
			waitFor(t, "the leaving backend's connection closed", func() bool {
				i++
				if _, _, err := getOp(t, sp, g, fmt.Sprint(i)); err != nil {
					t.Fatal(err)
				}
				return leaving.Open.Load() == 0
			})
			if n := leaving.Requests.Load(); n != before {
				t.Fatalf("the backend that left got %d requests after the refreshed answer", n-before)
			}
		})
	}
}
