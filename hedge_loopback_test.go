package httpretry

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hedgeServer answers the third request it receives with body, and holds
// the others until their client cancels them, reporting each cancellation
// on canceled.
type hedgeServer struct {
	body     []byte
	arrivals atomic.Int32
	canceled chan string // the protocol of each canceled request

	mu      sync.Mutex
	remotes []string // RemoteAddr of each request, in arrival order
}

func newHedgeServer(size int) *hedgeServer {
	body := make([]byte, size)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range body {
		body[i] = byte(r.Uint32())
	}
	return &hedgeServer{body: body, canceled: make(chan string, 8)}
}

func (s *hedgeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/warm" {
		return
	}
	s.mu.Lock()
	s.remotes = append(s.remotes, r.RemoteAddr)
	s.mu.Unlock()
	if s.arrivals.Add(1) <= 2 {
		<-r.Context().Done()
		s.canceled <- r.Proto
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(s.body)))
	w.Write(s.body)
}

// countingRT counts the requests it passes on.
type countingRT struct {
	rt http.RoundTripper
	n  atomic.Int32
}

func (c *countingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}

// TestHedgeWinnerBodyReadableAfterLosersCanceled: two attempts hang, the
// second hedge answers with 1 MiB; the two losers are canceled on the
// server (over HTTP/2, streams of the same connection as the winner's),
// and the winner's body is then read to EOF, every byte intact.
func TestHedgeWinnerBodyReadableAfterLosersCanceled(t *testing.T) {
	realTime(t)
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			srv := newHedgeServer(1 << 20)
			ts := newLoopbackServer(t, p.h2, srv)
			base := serverBase(t, ts)
			tr := &Transport{Base: base, Hedging: &Hedging{Delay: 20 * time.Millisecond}}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// A connection made beforehand: over HTTP/2 every attempt
			// then rides it, as streams of one connection.
			warm, err := base.RoundTrip(newRequest(t, ctx, "GET", ts.URL+"/warm", nil))
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, warm)
			var o Outcome
			req := newRequest(t, WithOutcome(ctx, &o), "GET", ts.URL+"/blob", nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			}
			wantProto := map[bool]string{false: "HTTP/1.1", true: "HTTP/2.0"}[p.h2]
			for range 2 {
				select {
				case proto := <-srv.canceled:
					if proto != wantProto {
						t.Errorf("a loser was sent over %s; want %s", proto, wantProto)
					}
				case <-ctx.Done():
					t.Fatal("the losers were not canceled on the server")
				}
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("reading the winner's body after the losers were canceled: %v (read %d bytes)", err, len(got))
			}
			if !bytes.Equal(got, srv.body) {
				t.Errorf("winner's body: %d bytes, equal %v; want the %d bytes sent", len(got), bytes.Equal(got, srv.body), len(srv.body))
			}
			if resp.Proto != wantProto {
				t.Errorf("winner's protocol %s; want %s", resp.Proto, wantProto)
			}
			if o.Attempts != 3 || o.Hedges != 2 || o.LosersCanceled != 2 || o.Winner < 1 || o.Reason != Final {
				t.Errorf("outcome = %+v; want 3 attempts, 2 hedges, 2 losers canceled, a winner", o)
			}
			srv.mu.Lock()
			defer srv.mu.Unlock()
			if p.h2 && (len(srv.remotes) != 3 || srv.remotes[0] != srv.remotes[1] || srv.remotes[1] != srv.remotes[2]) {
				t.Errorf("HTTP/2 attempts came from %v; want one connection", srv.remotes)
			}
		})
	}
}

// TestHedgesGoToHedgingBase: with Hedging.Base, the hedges use another
// connection pool: over HTTP/2, a connection other than the first
// attempt's.
func TestHedgesGoToHedgingBase(t *testing.T) {
	srv := newHedgeServer(1 << 10)
	ts := newLoopbackServer(t, true, srv)
	first := &countingRT{rt: serverBase(t, ts)}
	other := ts.Client().Transport.(*http.Transport).Clone()
	t.Cleanup(other.CloseIdleConnections)
	hedges := &countingRT{rt: other}
	tr := &Transport{Base: first, Hedging: &Hedging{Delay: 20 * time.Millisecond, Base: hedges}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := tr.RoundTrip(newRequest(t, ctx, "GET", ts.URL+"/blob", nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := readBody(t, resp); len(got) != 1<<10 {
		t.Errorf("body %d bytes; want 1024", len(got))
	}
	if first.n.Load() != 1 || hedges.n.Load() != 2 {
		t.Errorf("Base took %d, Hedging.Base %d; want 1 and 2", first.n.Load(), hedges.n.Load())
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	distinct := map[string]bool{}
	for _, r := range srv.remotes {
		distinct[r] = true
	}
	if len(distinct) < 2 {
		t.Errorf("requests came over %d connection(s) %v; want the hedges on another", len(distinct), srv.remotes)
	}
}
