package httpretry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/httptestutil"
	"github.com/httpretry/httpretry/idempotency"
	"github.com/jonboulle/clockwork"
)

// bodyServer records the bodies it receives; the first copy of each
// request answers slowly so that a hedge is sent.
type bodyServer struct {
	mu     sync.Mutex
	bodies [][32]byte
	sizes  []int
}

func (s *bodyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return // a canceled copy
	}
	s.mu.Lock()
	s.bodies = append(s.bodies, sha256.Sum256(b))
	s.sizes = append(s.sizes, len(b))
	n := len(s.bodies)
	s.mu.Unlock()
	if n == 1 {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(10 * time.Second):
		}
	}
	io.WriteString(w, "ok")
}

// TestHedgeEachAttemptSendsWholeBody: every hedge sends the whole request body of its own (GetBody, or a buffered copy); a body that cannot be had again is never hedged.
func TestHedgeEachAttemptSendsWholeBody(t *testing.T) {
	realTime(t)
	payload := bytes.Repeat([]byte("0123456789abcdef"), 64<<10/16) // 64 KiB
	want := sha256.Sum256(payload)
	cases := []struct {
		name    string
		body    func() io.Reader
		buffer  int64
		hedged  bool
		timeout time.Duration
	}{
		{"GetBody", func() io.Reader { return bytes.NewReader(payload) }, 0, true, 0},
		{"buffered", func() io.Reader { return io.NopCloser(bytes.NewReader(payload)) }, 1 << 20, true, 0},
		{"above BufferRequest", func() io.Reader { return io.NopCloser(bytes.NewReader(payload)) }, 1 << 10, false, 500 * time.Millisecond},
	}
	for _, h2 := range []bool{false, true} {
		for _, c := range cases {
			name := c.name + "/http1"
			if h2 {
				name = c.name + "/h2"
			}
			t.Run(name, func(t *testing.T) {
				s := &bodyServer{}
				srv := httptest.NewUnstartedServer(s)
				srv.EnableHTTP2 = h2
				srv.StartTLS()
				defer srv.Close()
				tr := &Transport{Base: srv.Client().Transport, MaxAttempts: 2, BufferRequest: c.buffer,
					Timeout: c.timeout, Hedging: &Hedging{Delay: 20 * time.Millisecond}}
				var o Outcome
				req := newRequest(t, WithOutcome(context.Background(), &o), "PUT", srv.URL, c.body())
				req.ContentLength = int64(len(payload))
				resp, err := tr.RoundTrip(req)
				if err == nil {
					resp.Body.Close()
				}
				s.mu.Lock()
				defer s.mu.Unlock()
				if !c.hedged {
					if o.Hedges != 0 || o.Attempts != 1 || len(s.bodies) > 1 {
						t.Errorf("a body that cannot be sent again was hedged: outcome %+v, server got %d", o, len(s.bodies))
					}
					return
				}
				if err != nil {
					t.Fatalf("RoundTrip: %v (outcome %+v)", err, o)
				}
				if o.Hedges != 1 || len(s.bodies) != 2 {
					t.Fatalf("outcome %+v, server got %d bodies; want one hedge, two bodies", o, len(s.bodies))
				}
				for i, b := range s.bodies {
					if b != want {
						t.Errorf("copy %d: body of %d bytes differs from the %d sent", i+1, s.sizes[i], len(payload))
					}
				}
			})
		}
	}
}

// countingBudget counts withdrawals and refunds.
type countingBudget struct{ withdrawn, refunded atomic.Int32 }

func (b *countingBudget) Deposit()                      {}
func (b *countingBudget) Refund()                       { b.refunded.Add(1) }
func (b *countingBudget) Withdraw(context.Context) bool { b.withdrawn.Add(1); return true }

// TestHedgeWithoutBodyGivesTokenBackAndKeepsFirst: a hedge whose body GetBody cannot give is not sent, its token is given back, and the first attempt's answer is returned.
func TestHedgeWithoutBodyGivesTokenBackAndKeepsFirst(t *testing.T) {
	realTime(t)
	var hits atomic.Int32
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		hits.Add(1)
		io.Copy(io.Discard, req.Body)
		time.Sleep(100 * time.Millisecond)
		return response(req, 200, "first"), nil
	})
	b := &countingBudget{}
	tr := &Transport{Base: base, MaxAttempts: 3, Budget: b, Hedging: &Hedging{Delay: 10 * time.Millisecond}}
	var o Outcome
	req := newRequest(t, WithOutcome(context.Background(), &o), "PUT", "https://api.example/items", strings.NewReader("x"))
	req.GetBody = func() (io.ReadCloser, error) { return nil, io.ErrUnexpectedEOF }
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if got := readBody(t, resp); got != "first" {
		t.Errorf("body %q", got)
	}
	if hits.Load() != 1 || o.Hedges != 0 || b.withdrawn.Load()-b.refunded.Load() != 0 {
		t.Errorf("hits %d, outcome %+v, tokens withdrawn %d refunded %d; want 1 hit, no hedge, no token kept",
			hits.Load(), o, b.withdrawn.Load(), b.refunded.Load())
	}
}

// TestHedgeIdempotencyMiddlewareConflictWinsNothing: with the idempotency middleware in front of a slow handler, hedges of a keyed POST get its 409 "in progress", which wins nothing; the handler runs once and the first attempt's 201 is returned.
func TestHedgeIdempotencyMiddlewareConflictWinsNothing(t *testing.T) {
	realTime(t)
	var runs atomic.Int32
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		time.Sleep(300 * time.Millisecond)
		w.WriteHeader(201)
		io.WriteString(w, "created")
	})
	store := idempotency.NewMemoryStore(idempotency.MemoryOptions{})
	srv := httptest.NewServer(idempotency.Handler(inner, store, idempotency.Options{}))
	defer srv.Close()
	var conflicts atomic.Int32
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := srv.Client().Transport.RoundTrip(req)
		if err == nil && resp.StatusCode == 409 {
			conflicts.Add(1)
		}
		return resp, err
	})
	tr := &Transport{Base: base, MaxAttempts: 3, Timeout: 10 * time.Second,
		Hedging: &Hedging{Delay: 30 * time.Millisecond, Deduplicates: true}}
	var o Outcome
	req := newRequest(t, WithOutcome(context.Background(), &o), "POST", srv.URL, strings.NewReader(`{"n":1}`))
	req.Header.Set(IdempotencyKeyHeader, "k-hedge")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip: %v (outcome %+v)", err, o)
	}
	if got := readBody(t, resp); resp.StatusCode != 201 || got != "created" {
		t.Errorf("status %d body %q; want 201 created", resp.StatusCode, got)
	}
	if runs.Load() != 1 || o.Winner != 1 || o.HedgeWon || conflicts.Load() < 1 {
		t.Errorf("handler ran %d times, %d conflicts, outcome %+v; want 1 run, attempt 1 winning over hedges answered 409",
			runs.Load(), conflicts.Load(), o)
	}
}

// TestHedgeFirstAttemptLeftToFinishTakesTheCallersBody: with
// FinishLosers the first attempt is sent on a goroutine of its own, as a
// hedge is, but it is still the first: it carries the caller's body, and
// GetBody is never asked for one when it answers before the hedge delay.
func TestHedgeFirstAttemptLeftToFinishTakesTheCallersBody(t *testing.T) {
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 200, Body: "ok"})
	tr := &Transport{Base: base, Clock: fc, Hedging: &Hedging{Delay: 10 * ms, FinishLosers: time.Second}}
	req := newRequest(t, context.Background(), "PUT", "https://api.example/items/1", strings.NewReader("payload"))
	getBody := req.GetBody
	var asked atomic.Int32
	req.GetBody = func() (io.ReadCloser, error) {
		asked.Add(1)
		return getBody()
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip error: %v", err)
	}
	if got := readBody(t, resp); got != "ok" {
		t.Errorf("body = %q; want ok", got)
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("GetBody asked %d times; want 0: the first attempt sends the caller's body", n)
	}
	if got := base.Requests(); len(got) != 1 || string(got[0].Body) != "payload" {
		t.Errorf("server got %d requests; want 1 with the caller's payload", len(got))
	}
}
