package httpretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHedgeHTTP2WinnerSlowBodyUnderIdleTimeout: over HTTP/2, the winner's body, sent slowly in chunks, is read to its end under IdleTimeout after the loser on the same connection was canceled.
func TestHedgeHTTP2WinnerSlowBodyUnderIdleTimeout(t *testing.T) {
	realTime(t)
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

// TestHedgeHTTP2CountsAgreeWithServer: over HTTP/2, each operation has exactly one winner, OnAttempt runs once per attempt, every other attempt is a canceled loser, and the counts agree with what the server saw.
func TestHedgeHTTP2CountsAgreeWithServer(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("op")
		mu.Lock()
		seen[id]++
		n := seen[id]
		mu.Unlock()
		if n == 1 && id != "warm" {
			select { // the first copy is slow: a hedge wins
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Second):
			}
		}
		io.WriteString(w, strings.Repeat("x", 4096))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	var calls sync.Map // op id -> *[]Attempt
	tr := &Transport{Base: srv.Client().Transport, MaxAttempts: 3, Budget: Unlimited,
		Hedging: &Hedging{Delay: 30 * time.Millisecond, MaxExtraLoad: 0.5},
		OnAttempt: func(req *http.Request, a Attempt) {
			v, _ := calls.LoadOrStore(req.URL.Query().Get("op"), &[]Attempt{})
			p := v.(*[]Attempt)
			*p = append(*p, a) // an operation's hooks never overlap and return before RoundTrip: no lock needed
		}}
	// Open the HTTP/2 connection first, so that no attempt waits for a dial.
	warm, err := srv.Client().Get(srv.URL + "/?op=warm")
	if err != nil {
		t.Fatal(err)
	}
	warm.Body.Close()
	const ops = 4 // at most 8 hedges: within the extra-load cap's burst of 10
	outs := make([]Outcome, ops)
	var wg sync.WaitGroup
	for i := range ops {
		wg.Go(func() {
			ctx := WithOutcome(context.Background(), &outs[i])
			resp, err := tr.RoundTrip(newRequest(t, ctx, "GET", fmt.Sprintf("%s/?op=%d", srv.URL, i), nil))
			if err != nil {
				t.Errorf("op %d: %v", i, err)
				return
			}
			if b, _ := io.ReadAll(resp.Body); len(b) != 4096 {
				t.Errorf("op %d: body %d bytes; want 4096", i, len(b))
			}
			resp.Body.Close()
		})
	}
	wg.Wait()
	srv.Client().Transport.(*http.Transport).CloseIdleConnections()
	for i, o := range outs {
		id := fmt.Sprint(i)
		v, _ := calls.Load(id)
		if v == nil {
			t.Errorf("op %d: no OnAttempt call", i)
			continue
		}
		as := *v.(*[]Attempt)
		mu.Lock()
		server := seen[id]
		mu.Unlock()
		if len(as) != o.Attempts || o.Hedges != o.Attempts-1 || o.LosersCanceled != o.Attempts-1 {
			t.Errorf("op %d: %d OnAttempt calls, outcome %+v", i, len(as), o)
		}
		if o.Attempts < 2 || server < 2 || server > o.Attempts {
			t.Errorf("op %d: server saw %d copies; outcome %+v", i, server, o)
		}
		winners := 0
		for _, a := range as {
			if !a.Canceled {
				winners++
			}
		}
		// Whichever copy reached the server first is the slow one: the
		// first attempt or a hedge may win.
		if winners != 1 || o.Winner < 1 || o.Winner > o.Attempts || o.HedgeWon != (o.Winner > 1) || o.HedgesRefused != 0 {
			t.Errorf("op %d: %d attempts not canceled, outcome %+v; want one winner", i, winners, o)
		}
	}
}

// TestHedgeFinishLosersCallerCancelEndsWinnerBodyHTTP2: over HTTP/2 too, with FinishLosers, canceling the caller's context ends the read of the winner's body while a loser was left to finish.
func TestHedgeFinishLosersCallerCancelEndsWinnerBodyHTTP2(t *testing.T) {
	realTime(t)
	var hits atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			<-r.Context().Done() // the first attempt loses to the hedge
			return
		}
		streamForever(w, r)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	tr := &Transport{Base: srv.Client().Transport, MaxAttempts: 2,
		Hedging: &Hedging{Delay: 20 * time.Millisecond, FinishLosers: 200 * time.Millisecond}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var o Outcome
	resp, err := tr.RoundTrip(newRequest(t, WithOutcome(ctx, &o), "GET", srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// Whichever copy reached the server first is the one that waits: the
	// first attempt or the hedge may win; the other is left to finish.
	if resp.ProtoMajor != 2 || o.Attempts != 2 || o.LosersCanceled != 1 {
		t.Fatalf("proto %s, outcome %+v; want HTTP/2 and one loser", resp.Proto, o)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 6)); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-readUntilError(resp.Body):
		if !errors.Is(err, context.Canceled) {
			t.Errorf("read ended with %v; want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		resp.Body.Close()
		t.Fatal("the winner's body still streams 10s after the caller's context was canceled")
	}
}
