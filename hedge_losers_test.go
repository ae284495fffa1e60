package httpretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
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

// TestHedgeFinishLosersCallerCancelEndsWinnerBody: canceling the caller's context ends the read of the returned body, with FinishLosers as without it.
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

// TestHedgeLoserPanicRaisedOnCaller: a Base panic on a losing attempt's goroutine is raised again on the caller's goroutine, as the docs say of any attempt.
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

// TestHedgeFinishLosersEndsLoserThatStreamsForever: with FinishLosers, a loser whose answer streams forever is drained (bounded), closed and canceled: the server sees it leave.
func TestHedgeFinishLosersEndsLoserThatStreamsForever(t *testing.T) {
	realTime(t)
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

// panicRecords is a slog handler that keeps every record, for tests whose
// records are written on another goroutine.
type panicRecords struct {
	mu      sync.Mutex
	records []slog.Record
	got     chan struct{}
}

func (h *panicRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h *panicRecords) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *panicRecords) WithGroup(string) slog.Handler            { return h }
func (h *panicRecords) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	select {
	case h.got <- struct{}{}:
	default:
	}
	return nil
}

// find returns the first record with msg.
func (h *panicRecords) find(msg string) (slog.Record, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.records {
		if r.Message == msg {
			return r, true
		}
	}
	return slog.Record{}, false
}

// TestHedgeFinishLosersLoserPanicIsLogged: a loser left to finish (FinishLosers) that panics after RoundTrip returned is logged at Error level, with the panic's type and never its value.
func TestHedgeFinishLosersLoserPanicIsLogged(t *testing.T) {
	var hits atomic.Int32
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if hits.Add(1) == 1 {
			<-req.Context().Done() // the loser, canceled once FinishLosers passed
			panic("secret-token-in-panic")
		}
		return response(req, 200, "winner"), nil
	})
	h := &panicRecords{got: make(chan struct{}, 1)}
	tr := &Transport{Base: base, MaxAttempts: 2, Logger: slog.New(h),
		Hedging: &Hedging{Delay: 10 * time.Millisecond, FinishLosers: 20 * time.Millisecond}}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "https://api.example/items", nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := readBody(t, resp); got != "winner" {
		t.Fatalf("body = %q; want winner", got)
	}
	deadline := time.After(10 * time.Second)
	for {
		if r, ok := h.find("httpretry: loser panicked after return"); ok {
			if r.Level != slog.LevelError {
				t.Errorf("level %v; want ERROR", r.Level)
			}
			var attrs []string
			r.Attrs(func(a slog.Attr) bool { attrs = append(attrs, a.String()); return true })
			all := strings.Join(attrs, " ")
			if !strings.Contains(all, "panic_type=string") || !strings.Contains(all, "attempt=1") || strings.Contains(all, "secret") {
				t.Errorf("attrs %q; want attempt=1 and panic_type=string, never the value", all)
			}
			return
		}
		select {
		case <-h.got:
		case <-deadline:
			t.Fatal("no record of the loser's panic 10s after it was canceled")
		}
	}
}

// TestHedgeLoserPanicClosesWinnerBody: when a loser's panic is raised on the caller, the winner's body, which nobody will read, is closed.
func TestHedgeLoserPanicClosesWinnerBody(t *testing.T) {
	var hits atomic.Int32
	winner := newCountingBody("winner")
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if hits.Add(1) == 1 {
			<-req.Context().Done()
			panic("loser broke")
		}
		resp := response(req, 200, "")
		resp.Body = winner
		return resp, nil
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
			t.Fatalf("recovered %v; want the loser's panic", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RoundTrip neither returned nor panicked")
	}
	if n := winner.closes(); n != 1 {
		t.Errorf("winner's body closed %d times; want 1", n)
	}
}

// TestHedgeFinishLosersKeepsHTTP1Connections: over HTTP/1.1, losers left to finish (FinishLosers) give their connections back for reuse, where canceled losers close theirs.
func TestHedgeFinishLosersKeepsHTTP1Connections(t *testing.T) {
	realTime(t)
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

// TestHedgeHookPanicEndsEveryAttempt: the hedge of an operation whose
// first attempt hangs is answered 503, and OnAttempt panics when it is
// reported. RoundTrip panics with the hook's value, and only after the
// first attempt has been canceled and has ended: a panicking hook ends
// every attempt of the operation, as a panicking Base does.
func TestHedgeHookPanicEndsEveryAttempt(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	ended := make(chan struct{})
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if hits.Add(1) == 1 {
			<-req.Context().Done()
			close(ended)
			return nil, req.Context().Err()
		}
		return response(req, 503, "busy"), nil
	})
	tr := &Transport{Base: base, MaxAttempts: 3, Hedging: &Hedging{Delay: 10 * time.Millisecond},
		OnAttempt: func(*http.Request, Attempt) { panic("hook broke") }}
	if p := panicOf(t, tr, newRequest(t, context.Background(), "GET", "https://api.example/items", nil)); p != "hook broke" {
		t.Errorf("recovered %v; want the hook's panic", p)
	}
	select {
	case <-ended:
	default:
		t.Error("RoundTrip panicked while the first attempt was still running")
	}
}

// TestHedgeDiscardedBodyIsDrainedOffTheCallersPath: the first attempt's
// 503 comes while a hedge runs, with a body that trickles and then
// stalls until the test releases it; the hedge answers 200. The 503 is
// drained on a goroutine of its own: RoundTrip returns the hedge's answer
// while that body is still stalled, and the drain ends (the body closed)
// once it is released.
func TestHedgeDiscardedBodyIsDrainedOffTheCallersPath(t *testing.T) {
	realTime(t)
	t.Parallel()
	stalled := &stallingBody{release: make(chan struct{}), closed: make(chan struct{})}
	var hits atomic.Int32
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if hits.Add(1) == 1 {
			time.Sleep(20 * time.Millisecond) // answers after the hedge was sent
			resp := response(req, 503, "")
			resp.Body = stalled
			return resp, nil
		}
		time.Sleep(100 * time.Millisecond) // answers after the 503
		return response(req, 200, "hedge"), nil
	})
	tr := &Transport{Base: base, MaxAttempts: 2, Hedging: &Hedging{Delay: 5 * time.Millisecond}}
	done := make(chan string, 1)
	go func() {
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "https://api.example/items", nil))
		if err != nil {
			done <- err.Error()
			return
		}
		done <- readBody(t, resp)
	}()
	select {
	case got := <-done:
		if got != "hedge" {
			t.Errorf("RoundTrip gave %q; want the hedge's answer", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RoundTrip did not return while a discarded answer's body stalled: it was drained on the caller's path")
	}
	close(stalled.release)
	select {
	case <-stalled.closed:
	case <-time.After(10 * time.Second):
		t.Error("the discarded body was never closed")
	}
}

// stallingBody yields a byte, then blocks every Read until release is
// closed, whatever Close does meanwhile.
type stallingBody struct {
	release   chan struct{}
	closed    chan struct{}
	once      sync.Once
	gaveFirst atomic.Bool
}

func (b *stallingBody) Read(p []byte) (int, error) {
	if !b.gaveFirst.Swap(true) && len(p) > 0 {
		p[0] = 'x'
		return 1, nil
	}
	<-b.release
	return 0, io.EOF
}

func (b *stallingBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// TestHedgeLoserIsReportedAsLostNotTimedOut: the first attempt hangs, the
// hedge wins, and the first is canceled as a loser. OnAttempt reports the
// loser with an error of class hedge_lost, which is a cancellation and
// not an attempt timeout: metrics do not count it as a timeout, nor as a
// failed first attempt.
func TestHedgeLoserIsReportedAsLostNotTimedOut(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if hits.Add(1) == 1 {
			<-req.Context().Done()
			return nil, req.Context().Err()
		}
		return response(req, 200, "hedge"), nil
	})
	var mu sync.Mutex
	reports := map[int]Attempt{}
	tr := &Transport{Base: base, Hedging: &Hedging{Delay: 5 * time.Millisecond},
		OnAttempt: func(_ *http.Request, a Attempt) { mu.Lock(); reports[a.Number] = a; mu.Unlock() }}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "https://api.example/items", nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := readBody(t, resp); got != "hedge" {
		t.Fatalf("body %q; want the hedge's", got)
	}
	mu.Lock()
	defer mu.Unlock()
	loser, ok := reports[1]
	if !ok || !loser.Canceled {
		t.Fatalf("attempt 1 reported %+v; want a canceled loser", loser)
	}
	if class := ErrorClass(loser.Err); class != "hedge_lost" || errors.Is(loser.Err, ErrAttemptTimeout) || !errors.Is(loser.Err, context.Canceled) {
		t.Errorf("loser's error %v: class %q, attempt timeout %v; want hedge_lost, a cancellation, not a timeout", loser.Err, class, errors.Is(loser.Err, ErrAttemptTimeout))
	}
}

// TestHedgeHookPanicWhileSettlingLosersEndsTheRest: the first attempt and
// the first hedge hang, the second hedge wins, and OnAttempt panics when
// the first loser is reported. RoundTrip panics with the hook's value
// once the other loser has ended too, and does not wait for a loser it
// already received.
func TestHedgeHookPanicWhileSettlingLosersEndsTheRest(t *testing.T) {
	t.Parallel()
	var hits, hung atomic.Int32
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if hits.Add(1) <= 2 {
			<-req.Context().Done()
			hung.Add(1)
			return nil, req.Context().Err()
		}
		return response(req, 200, "hedge"), nil
	})
	tr := &Transport{Base: base, MaxAttempts: 3, Hedging: &Hedging{Delay: 5 * time.Millisecond},
		OnAttempt: func(_ *http.Request, a Attempt) {
			if a.Canceled {
				panic("hook broke")
			}
		}}
	got := make(chan any, 1)
	go func() {
		defer func() { got <- recover() }()
		tr.RoundTrip(newRequest(t, context.Background(), "GET", "https://api.example/items", nil))
	}()
	select {
	case p := <-got:
		if p != "hook broke" {
			t.Errorf("recovered %v; want the hook's panic", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RoundTrip neither returned nor panicked: it waited for a loser it had already received")
	}
	if n := hung.Load(); n != 2 {
		t.Errorf("%d of the 2 hanging attempts ended when RoundTrip panicked; want both", n)
	}
}

// TestHedgeLoserLeftToFinishJudgesAStallByTheOperationsMinAttemptTime:
// the attempts left to finish read the part of the operation settled
// before its first attempt; whether a loser cut by the caller's deadline
// had the server silent for MinAttemptTime (an overload signal) is
// judged by the operation's own MinAttemptTime there too: sent 1 second
// ago under a MinAttemptTime of 1 minute, it was no stall.
func TestHedgeLoserLeftToFinishJudgesAStallByTheOperationsMinAttemptTime(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	h := &hedged{}
	h.op = operation{t: &Transport{}, clock: fc, policy: policy{maxAttempts: 3, minAttemptTime: time.Minute, maxRetryAfter: time.Hour}}
	h.shareSettled()
	sent := fc.Now().Add(-time.Second)
	if got, want := h.settled.stalledFor(sent), h.op.stalledFor(sent); got != want || got {
		t.Errorf("settled part: stalled %v; the operation: %v; want both false", got, want)
	}
	if h.settled.policy != h.op.policy {
		t.Errorf("settled policy %+v; want the operation's %+v", h.settled.policy, h.op.policy)
	}
}
