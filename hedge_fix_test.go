package httpretry

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

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

// Expected: a loser left to finish (FinishLosers) that panics after RoundTrip returned is logged at Error level, with the panic's type and never its value.
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

// Expected: when a loser's panic is raised on the caller, the winner's body, which nobody will read, is closed.
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

// Expected: the stop rules of Retry-After see one a discarded hedge received: the fallback retry stops as retry_after_exceeds_deadline or retry_after_too_long rather than sending early.
func TestHedgeFallbackRetryStopsOnEarlierRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name          string
		timeout       time.Duration
		maxRetryAfter time.Duration
		want          StopReason
	}{
		{"exceeds deadline", 2 * time.Second, 0, RetryAfterExceedsDeadline},
		{"too long", 30 * time.Second, 3 * time.Second, RetryAfterTooLong},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hits atomic.Int32
			base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
				switch hits.Add(1) {
				case 1: // slow, then a 503 without Retry-After
					select {
					case <-time.After(300 * time.Millisecond):
					case <-req.Context().Done():
						return nil, req.Context().Err()
					}
					return response(req, 503, "busy"), nil
				case 2: // the hedge: a 503 asking for 10s
					resp := response(req, 503, "later")
					resp.Header.Set("Retry-After", "10")
					return resp, nil
				}
				return response(req, 200, "ok"), nil
			})
			tr := &Transport{Base: base, MaxAttempts: 3, Timeout: tc.timeout, MaxRetryAfter: tc.maxRetryAfter,
				BaseDelay: time.Millisecond, Budget: &onceRefusingBudget{}, Hedging: &Hedging{Delay: 20 * time.Millisecond}}
			var o Outcome
			resp, err := tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", "https://api.example/items", nil))
			if err != nil {
				t.Fatalf("RoundTrip: %v; want the last 503 returned", err)
			}
			// The stop hands back the last answer, the first attempt's.
			if got := readBody(t, resp); resp.StatusCode != 503 || got != "busy" {
				t.Errorf("answer %d %q; want 503 busy", resp.StatusCode, got)
			}
			if o.Reason != tc.want || hits.Load() != 2 || o.Attempts != 2 {
				t.Errorf("outcome %+v, %d hits; want %s after 2 attempts", o, hits.Load(), tc.want)
			}
		})
	}
}

// Expected: once the extra-load cap is empty, refused hedges are counted in Outcome.HedgesRefused but leave no record at Info level or above: a whole slow server would otherwise log one per operation.
func TestHedgeRefusedNotLoggedAboveDebug(t *testing.T) {
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		select {
		case <-time.After(20 * time.Millisecond):
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
		return response(req, 200, "ok"), nil
	})
	h := &panicRecords{got: make(chan struct{}, 1)}
	tr := &Transport{Base: base, MaxAttempts: 2, Budget: Unlimited, Logger: slog.New(h),
		Hedging: &Hedging{Delay: time.Millisecond, MaxExtraLoad: 0.01}}
	refused := 0
	for range 30 { // the burst of 10 is spent by the first 10
		var o Outcome
		resp, err := tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", "https://api.example/items", nil))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		refused += o.HedgesRefused
	}
	if refused == 0 {
		t.Fatal("no hedge refused over 30 slow operations; want the cap to refuse those past the burst")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	debug := 0
	for _, r := range h.records {
		if r.Message != "httpretry: hedge refused" {
			continue
		}
		if r.Level >= slog.LevelInfo {
			t.Fatalf("hedge refused logged at %v; want Debug", r.Level)
		}
		debug++
	}
	if debug != refused {
		t.Errorf("%d Debug records of refused hedges; Outcome.HedgesRefused summed to %d", debug, refused)
	}
}

// Expected: over HTTP/2 too, with FinishLosers, canceling the caller's context ends the read of the winner's body while a loser was left to finish.
func TestHedgeFinishLosersCallerCancelEndsWinnerBodyHTTP2(t *testing.T) {
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
