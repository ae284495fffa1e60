package httpretry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// chain is client → A → B → D on loopback, each hop calling the next
// through its own httpretry Transport with MaxAttempts 3.
type chain struct {
	a, b, d    *httptest.Server
	transports []*Transport
	dHits      atomic.Int64
	mu         sync.Mutex
	dEnded     []time.Time // when D's handler saw its context end
}

// newChain builds the chain. With owned set, every hop runs behind
// DeadlineHandler and every Transport propagates; slowD makes D hang until its
// context ends instead of answering 503.
func newChain(t *testing.T, owned, slowD bool) *chain {
	t.Helper()
	c := &chain{}
	c.d = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.dHits.Add(1)
		if slowD {
			<-r.Context().Done()
			c.mu.Lock()
			c.dEnded = append(c.dEnded, time.Now())
			c.mu.Unlock()
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	c.b = httptest.NewServer(c.hop(t, c.d.URL, owned))
	c.a = httptest.NewServer(c.hop(t, c.b.URL, owned))
	t.Cleanup(func() {
		c.a.Close()
		c.b.Close()
		c.d.Close()
		for _, tr := range c.transports {
			tr.CloseIdleConnections()
		}
	})
	return c
}

// transport returns a Transport of the chain's policy.
func (c *chain) transport(owned bool) *Transport {
	tr := &Transport{MaxAttempts: 3, Jitter: noJitter, Budget: Unlimited, Propagate: owned}
	c.transports = append(c.transports, tr)
	return tr
}

// hop is a service that forwards each request to next and answers with
// next's status.
func (c *chain) hop(t *testing.T, next string, owned bool) http.Handler {
	client := &http.Client{Transport: c.transport(owned)}
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), "GET", next, nil)
		if err != nil {
			t.Error(err)
			return
		}
		resp, err := client.Do(req)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
	})
	if owned {
		h = DeadlineHandler(h, 5*time.Second)
	}
	return h
}

// TestRetryAtOneLayer: three layers of three attempts make 3 × 3 × 3 = 27, measured on real
// services, and what Propagate and DeadlineHandler make of it.
func TestRetryAtOneLayer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		owned bool
		want  int64
	}{
		{"every layer retries", false, 27},
		{"Propagate and DeadlineHandler at every hop", true, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newChain(t, tc.owned, false)
			client := &http.Client{Transport: c.transport(tc.owned)}
			resp, err := client.Get(c.a.URL)
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("status = %d; want D's 503 passed back", resp.StatusCode)
			}
			if got := c.dHits.Load(); got != tc.want {
				t.Errorf("D received %d requests for one logical call; want %d", got, tc.want)
			}
			t.Logf("%s: D received %d requests for one logical call", tc.name, c.dHits.Load())
		})
	}
}

// deadlineFloor is how long after the client's deadline the last hop may
// still be working on an idle machine: the propagated deadline is rounded
// down to whole milliseconds at each hop, and cancellation crosses two
// loopback connections and the race detector's overhead. A busy machine
// adds what bare requests, measured beside the test, return late.
const deadlineFloor = 100 * time.Millisecond

func TestDeadlinePropagatesThroughChain(t *testing.T) {
	realTime(t)
	t.Parallel()
	probe := startBareProbe(2, 300*ms)
	c := newChain(t, true, true)
	client := &http.Client{Transport: c.transport(true)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	req, _ := http.NewRequestWithContext(ctx, "GET", c.a.URL, nil)
	// Each hop rounds the time left down to whole milliseconds, so D's
	// deadline can fall a little before the client's, and the client may
	// then get an answer just in time: either outcome is fine here.
	resp, clientErr := client.Do(req)
	if clientErr == nil {
		resp.Body.Close()
	}
	// D's handler records when its context ended; wait for it.
	for end := time.Now().Add(5 * time.Second); ; {
		c.mu.Lock()
		n := len(c.dEnded)
		c.mu.Unlock()
		if n > 0 || time.Now().After(end) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dHits.Load() == 0 && clientErr != nil && time.Now().After(deadline) {
		// A machine busy enough to spend the whole second on the three
		// hops before D: nothing reached D to keep working.
		t.Logf("the client's deadline passed before the request reached D: %v", clientErr)
		probe.stop(0)
		return
	}
	if len(c.dEnded) != 1 || c.dHits.Load() != 1 {
		t.Fatalf("D saw %d requests, %d ended; want 1 and 1", c.dHits.Load(), len(c.dEnded))
	}
	late := c.dEnded[0].Sub(deadline)
	slack, desc := bareSlack(probe.stop(4), 100, 3, deadlineFloor)
	t.Log(desc)
	if late > slack {
		t.Errorf("D kept working %v after the client's deadline; want at most %v", late, slack)
	}
	t.Logf("D's context ended %v after the client's deadline", late)
}
