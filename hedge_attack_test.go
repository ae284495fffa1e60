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

// streamForever answers with a chunk every 10ms until the client leaves.
func streamForever(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(200)
	for {
		if _, err := io.WriteString(w, "chunk\n"); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// readUntilError reads body until an error, reporting it on the channel.
func readUntilError(body io.Reader) <-chan error {
	ch := make(chan error, 1)
	go func() {
		buf := make([]byte, 512)
		for {
			if _, err := body.Read(buf); err != nil {
				ch <- err
				return
			}
		}
	}()
	return ch
}

// Expected: canceling the caller's context ends the read of the returned body, with FinishLosers as without it.
func TestHedgeFinishLosersCallerCancelEndsWinnerBody(t *testing.T) {
	for _, finish := range []time.Duration{0, 50 * time.Millisecond} {
		t.Run(fmt.Sprintf("FinishLosers=%v", finish), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(streamForever))
			defer srv.Close()
			tr := &Transport{Base: srv.Client().Transport, MaxAttempts: 2,
				Hedging: &Hedging{Delay: time.Minute, FinishLosers: finish}}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			resp, err := tr.RoundTrip(newRequest(t, ctx, "GET", srv.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			buf := make([]byte, 6)
			if _, err := io.ReadFull(resp.Body, buf); err != nil {
				t.Fatal(err)
			}
			cancel()
			select {
			case err := <-readUntilError(resp.Body):
				if !errors.Is(err, context.Canceled) {
					t.Logf("read ended with %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Error("the body still streams 5s after the caller's context was canceled")
				resp.Body.Close()
			}
		})
	}
}

// Expected: a Base panic on a losing attempt's goroutine is raised again on the caller's goroutine, as the docs say of any attempt.
func TestHedgeLoserPanicRaisedOnCaller(t *testing.T) {
	var hits atomic.Int32
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if hits.Add(1) == 1 {
			<-req.Context().Done() // the loser, canceled when the hedge wins
			panic("loser broke")
		}
		return response(req, 200, "winner"), nil
	})
	tr := &Transport{Base: base, MaxAttempts: 2, Hedging: &Hedging{Delay: 10 * time.Millisecond}}
	got := make(chan any, 1)
	go func() {
		defer func() { got <- recover() }()
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "https://api.example/items", nil))
		if err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case p := <-got:
		if p != "loser broke" {
			t.Errorf("recovered %v; want the losing attempt's panic raised again", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("RoundTrip neither returned nor panicked")
	}
}

// onceRefusingBudget admits every withdrawal but the second.
type onceRefusingBudget struct{ n atomic.Int32 }

func (b *onceRefusingBudget) Deposit()                      {}
func (b *onceRefusingBudget) Refund()                       {}
func (b *onceRefusingBudget) Withdraw(context.Context) bool { return b.n.Add(1) != 2 }

// Expected: when every attempt has failed, the retry waits out a Retry-After that any failed attempt of the operation received.
func TestHedgeFallbackRetryHonoursEarlierRetryAfter(t *testing.T) {
	var mu sync.Mutex
	var starts []time.Time
	var raAnswered time.Time
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		mu.Lock()
		starts = append(starts, time.Now())
		n := len(starts)
		mu.Unlock()
		switch n {
		case 1: // the first attempt: slow, then a 503 without Retry-After
			select {
			case <-time.After(time.Second):
			case <-req.Context().Done():
				return nil, req.Context().Err()
			}
			return response(req, 503, "busy"), nil
		case 2: // the hedge: a 503 asking for 2s at once
			resp := response(req, 503, "later")
			resp.Header.Set("Retry-After", "2")
			mu.Lock()
			raAnswered = time.Now()
			mu.Unlock()
			return resp, nil
		}
		return response(req, 200, "ok"), nil
	})
	tr := &Transport{Base: base, MaxAttempts: 3, Timeout: 20 * time.Second, BaseDelay: time.Millisecond,
		Budget: &onceRefusingBudget{}, Hedging: &Hedging{Delay: 20 * time.Millisecond}}
	var o Outcome
	resp, err := tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", "https://api.example/items", nil))
	if err != nil {
		t.Fatalf("RoundTrip: %v (outcome %+v)", err, o)
	}
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(starts) != 3 {
		t.Fatalf("%d attempts; want 3 (first, hedge, retry), outcome %+v", len(starts), o)
	}
	// A lower bound only: a busy machine makes the gap longer, never shorter.
	if gap := starts[2].Sub(raAnswered); gap < 1900*time.Millisecond {
		t.Errorf("retry sent %v after the server asked for 2s (outcome %+v)", gap, o)
	}
}

// Expected: over many operations, hedges stay within the extra-load cap, a burst of 10 plus twice MaxExtraLoad per operation, and Outcome.Hedges counts every hedge the server saw.
func TestHedgeExtraLoadCapOverManyOperations(t *testing.T) {
	var hits atomic.Int64
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		hits.Add(1)
		select {
		case <-time.After(4 * time.Millisecond):
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
		return response(req, 200, "ok"), nil
	})
	const ops = 300
	tr := &Transport{Base: base, MaxAttempts: 3, Budget: Unlimited,
		Hedging: &Hedging{Delay: time.Millisecond, MaxExtraLoad: 0.02}}
	hedges := 0
	for i := range ops {
		var o Outcome
		resp, err := tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", "https://api.example/items", nil))
		if err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
		resp.Body.Close()
		hedges += o.Hedges
	}
	// The cap refills at twice MaxExtraLoad (Hedging.MaxExtraLoad's
	// doc), so that late answers bunched together do not find it empty.
	limit := 10 + int(hedgeHeadroom*0.02*ops) + 1
	if hedges > limit {
		t.Errorf("%d hedges over %d operations; want at most %d", hedges, ops, limit)
	}
	if got := int(hits.Load()) - ops; got != hedges {
		t.Errorf("server saw %d extra requests; Outcome.Hedges summed to %d", got, hedges)
	}
}

// Expected: over HTTP/2, each operation has exactly one winner, OnAttempt runs once per attempt, every other attempt is a canceled loser, and the counts agree with what the server saw.
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
			*p = append(*p, a) // OnAttempt runs on RoundTrip's goroutine: no lock needed
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

// Expected: with FinishLosers, a loser whose answer streams forever is drained (bounded), closed and canceled: the server sees it leave.
func TestHedgeFinishLosersEndsLoserThatStreamsForever(t *testing.T) {
	var hits atomic.Int32
	left := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			time.Sleep(100 * time.Millisecond) // slow headers: the hedge wins
			streamForever(w, r)
			close(left)
			return
		}
		io.WriteString(w, "winner")
	}))
	defer srv.Close()
	tr := &Transport{Base: srv.Client().Transport, MaxAttempts: 2,
		Hedging: &Hedging{Delay: 20 * time.Millisecond, FinishLosers: 300 * time.Millisecond}}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := readBody(t, resp); got != "winner" {
		t.Fatalf("body = %q", got)
	}
	select {
	case <-left:
	case <-time.After(10 * time.Second):
		t.Fatal("the loser's stream still runs 10s after the winner")
	}
}

// TestHedgeUnboundedKeysStayBounded: a Key returning a new value for
// every request keeps at most MaxKeys distributions, the latest keys'.
func TestHedgeUnboundedKeysStayBounded(t *testing.T) {
	var n atomic.Int64
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) { return response(req, 200, "ok"), nil })
	tr := &Transport{Base: base, Hedging: &Hedging{MaxKeys: 4, Key: func(*http.Request) string { return fmt.Sprint(n.Add(1)) }}}
	for range 500 {
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "https://api.example/items", nil))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	s := tr.latencies()
	if keys := s.Len(); keys != 4 {
		t.Errorf("%d keys kept; want MaxKeys = 4", keys)
	}
	if s.Find("500") == nil || s.Find("1") != nil {
		t.Error("want the last key held and the first evicted")
	}
}
