package httpretry

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// Expected: over HTTP/1.1, losers left to finish (FinishLosers) give their connections back for reuse, where canceled losers close theirs.
func TestHedgeFinishLosersKeepsHTTP1Connections(t *testing.T) {
	const ops = 6
	conns := func(finish time.Duration) int64 {
		var opened, done atomic.Int64
		var hits atomic.Int64
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer done.Add(1)
			if hits.Add(1)%2 == 1 { // the first copy of each operation
				select {
				case <-r.Context().Done():
					return
				case <-time.After(150 * time.Millisecond):
				}
			}
			io.WriteString(w, "ok")
		}))
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				opened.Add(1)
			}
		}
		srv.Start()
		defer srv.Close()
		base := srv.Client().Transport.(*http.Transport)
		defer base.CloseIdleConnections()
		tr := &Transport{Base: base, MaxAttempts: 2, Hedging: &Hedging{Delay: 30 * time.Millisecond, FinishLosers: finish}}
		for i := range ops {
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", srv.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			// Wait for the loser to end on the server, so that each
			// operation finds the connections the last one left.
			for deadline := time.Now().Add(5 * time.Second); done.Load() < int64(2*(i+1)); {
				if time.Now().After(deadline) {
					t.Fatalf("op %d: the server ended %d requests", i, done.Load())
				}
				time.Sleep(time.Millisecond)
			}
			time.Sleep(100 * time.Millisecond) // for the drained connection to be put back; more only helps
		}
		return opened.Load()
	}
	canceled, finished := conns(0), conns(5*time.Second)
	t.Logf("connections opened over %d operations: losers canceled %d, losers finished %d", ops, canceled, finished)
	if finished > 4 || finished >= canceled {
		t.Errorf("with FinishLosers %d connections were opened over %d operations; want the connections reused (at most 4, fewer than the %d with losers canceled)", finished, ops, canceled)
	}
}

// Expected: over HTTP/2, the winner's body, sent slowly in chunks, is read to its end under IdleTimeout after the loser on the same connection was canceled.
func TestHedgeHTTP2WinnerSlowBodyUnderIdleTimeout(t *testing.T) {
	var hits atomic.Int32
	var loserLeft atomic.Bool
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			<-r.Context().Done()
			loserLeft.Store(true)
			return
		}
		chunk := make([]byte, 16<<10)
		for range 16 { // 256 KiB in 16 chunks, 30ms apart
			if _, err := w.Write(chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			time.Sleep(30 * time.Millisecond)
		}
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	tr := &Transport{Base: srv.Client().Transport, MaxAttempts: 2, IdleTimeout: 2 * time.Second,
		Hedging: &Hedging{Delay: 20 * time.Millisecond}}
	var o Outcome
	resp, err := tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("proto %s; want HTTP/2", resp.Proto)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || n != 256<<10 {
		t.Errorf("read %d bytes, err %v; want 256 KiB to EOF", n, err)
	}
	// Whichever copy reached the server first is the one that waits: the
	// first attempt's stream may be handled after the hedge's, so either
	// may win, over the other canceled.
	if o.Attempts != 2 || o.Winner < 1 || o.Winner > 2 || o.HedgeWon != (o.Winner == 2) || o.LosersCanceled != 1 {
		t.Errorf("outcome %+v; want one winner over one canceled loser", o)
	}
	for deadline := time.Now().Add(5 * time.Second); !loserLeft.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the loser's request still runs on the server")
		}
	}
}

// Expected: Offset is 0 for a period that is not positive, within [0, period) otherwise, and the same on every call.
func TestOffsetEdges(t *testing.T) {
	for _, p := range []time.Duration{0, -1, -time.Hour, minDuration} {
		if got := Offset("pod-7", p); got != 0 {
			t.Errorf("Offset(pod-7, %v) = %v; want 0", p, got)
		}
	}
	for _, p := range []time.Duration{1, 2, time.Second, time.Hour, 1<<63 - 1} {
		for _, id := range []string{"", "pod-1", "pod-2", "\x00\xff"} {
			got := Offset(id, p)
			if got < 0 || got >= p || got != Offset(id, p) {
				t.Errorf("Offset(%q, %v) = %v; want a stable value in [0, period)", id, p, got)
			}
		}
	}
}

const minDuration = -1 << 63
