package httpretry

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// slowLink is a Base that holds each request for lag before sending it
// through inner, as a distant server would, so that a short hedge delay
// passes while an attempt is in flight; it panics, or cancels the
// operation's context, for a request marked with boomHeader as mode says.
type slowLink struct {
	inner http.RoundTripper
	lag   time.Duration
	mode  string // "base": panic; "cancel": the caller cancels
}

// cancelKey carries the cancel of a test operation's context.
type cancelKey struct{}

func (s *slowLink) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get(boomHeader) != "" {
		switch s.mode {
		case "base":
			panic("base broke")
		case "cancel":
			r.Context().Value(cancelKey{}).(context.CancelFunc)()
		}
	}
	timer := time.NewTimer(s.lag)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	return s.inner.RoundTrip(r)
}

// boomHandler is a slog handler that panics on a record logged for an
// operation whose context is marked with boomKey.
type boomHandler struct{}

type boomKey struct{}

func (boomHandler) Enabled(context.Context, slog.Level) bool { return true }
func (boomHandler) Handle(ctx context.Context, _ slog.Record) error {
	if ctx.Value(boomKey{}) != nil {
		panic("handler broke")
	}
	return nil
}
func (h boomHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h boomHandler) WithGroup(string) slog.Handler      { return h }

// TestHedgedHoldersBehindNginxLimitReqAreReleasedOneAtATime: a real nginx
// with limit_req (6 a minute, limit_req_status 429) in front of a backend
// whose first answer is a 429 with Retry-After: 1. That 429 pauses the
// destination, and 16 hedged operations with WaitQuota (3 attempts each)
// are held for it; each attempt takes 3ms on the way, longer than the
// hedge delay. When the pause ends they are let go one at a time, nginx
// answering each with a bare 429 that passes the turn on; a hedge asked
// for meanwhile is refused. One operation in four breaks: its Base,
// Transient, OnAttempt or Logger handler panics, or its caller cancels.
// Whatever breaks, and whether hedges are fixed, adaptive, given their
// own Base or left to finish, every operation returns (an answer, its
// caller's error, or the panic), nginx never has two of the client's
// requests at once, and it sees every request Base sent; no goroutine is
// left behind (the package's goleak check).
func TestHedgedHoldersBehindNginxLimitReqAreReleasedOneAtATime(t *testing.T) {
	secondsOfRealTime(t)
	hedgings := map[string]func(base http.RoundTripper) *Hedging{
		"fixed":    func(http.RoundTripper) *Hedging { return &Hedging{Delay: time.Millisecond} },
		"adaptive": func(http.RoundTripper) *Hedging { return &Hedging{MinSamples: 1, MinDelay: time.Millisecond} },
		"FinishLosers": func(http.RoundTripper) *Hedging {
			return &Hedging{Delay: time.Millisecond, FinishLosers: 20 * time.Millisecond}
		},
		"Base": func(b http.RoundTripper) *Hedging { return &Hedging{Delay: time.Millisecond, Base: b} },
	}
	for _, breaks := range []string{"nothing", "base", "cancel", "Transient", "OnAttempt", "Logger"} {
		for name, hedging := range hedgings {
			t.Run(breaks+"/"+name, func(t *testing.T) {
				t.Parallel()
				hedgedRelease(t, breaks, hedging)
			})
		}
	}
}

// hedgedRelease runs TestHedgedHoldersBehindNginxLimitReqAreReleasedOneAtATime's
// scenario for what breaks and a Hedging.
func hedgedRelease(t *testing.T, breaks string, hedging func(http.RoundTripper) *Hedging) {
	t.Helper()
	inner := &http.Transport{MaxIdleConnsPerHost: 64}
	defer inner.CloseIdleConnections()
	base := &inflightCounter{inner: &slowLink{inner: inner, lag: 3 * time.Millisecond, mode: breaks}}
	ngx, th := pausedBehindNginx(t, base)
	boomed := func(resp *http.Response) bool {
		return resp != nil && resp.Request != nil && resp.Request.Header.Get(boomHeader) != ""
	}
	tr := &Transport{Base: base, MaxAttempts: 3, MaxRetryAfter: time.Minute, BaseDelay: time.Millisecond,
		MaxDelay: 10 * time.Millisecond, Throttle: th, Hedging: hedging(base)}
	switch breaks {
	case "Transient":
		tr.Transient = func(resp *http.Response, err error) bool {
			if boomed(resp) {
				panic("hook broke")
			}
			return IsTransient(resp, err)
		}
	case "OnAttempt":
		tr.OnAttempt = func(req *http.Request, _ Attempt) {
			if req.Header.Get(boomHeader) != "" {
				panic("hook broke")
			}
		}
	case "Logger":
		tr.Logger = slog.New(boomHandler{})
	}
	const holders = 16
	var wg sync.WaitGroup
	var returned, panicked atomic.Int32
	for i := range holders {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			boom := i%4 == 0 && breaks != "nothing"
			if boom {
				ctx = context.WithValue(context.WithValue(ctx, cancelKey{}, context.CancelFunc(cancel)), boomKey{}, true)
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ngx.URL+"/", nil)
			if boom {
				req.Header.Set(boomHeader, "1")
			}
			defer func() {
				if p := recover(); p != nil {
					panicked.Add(1)
				}
			}()
			resp, err := tr.RoundTrip(req)
			returned.Add(1)
			if err == nil {
				resp.Body.Close()
			} else if !boom {
				t.Errorf("held operation: %v; want an answer", err)
			}
		})
	}
	wg.Wait()
	if n := returned.Load() + panicked.Load(); n != holders {
		t.Errorf("%d of %d held operations returned or panicked", n, holders)
	}
	if most := base.most.Load(); most != 1 {
		t.Errorf("nginx had up to %d of the client's requests at once; want 1: the held operations go one at a time", most)
	}
	sent := base.n.Load()
	if breaks == "base" {
		return // a Base that panics sends nothing: nginx sees fewer than Base was called
	}
	logged, err := ngx.Requests()
	for end := time.Now().Add(hangGuardBody); err == nil && int64(logged) < sent && breaks != "cancel" && breaks != "Logger" && time.Now().Before(end); {
		time.Sleep(time.Millisecond) // a poll, not a timing assumption
		logged, err = ngx.Requests()
	}
	if err != nil {
		t.Fatal(err)
	}
	switch breaks {
	case "cancel", "Logger":
		// An attempt canceled (by its caller, or as the Logger's panic
		// ends the attempts in flight) may end before nginx sees it.
		if int64(logged) > sent {
			t.Errorf("nginx logged %d requests, the client sent %d; want no more", logged, sent)
		}
	default:
		if int64(logged) != sent {
			t.Errorf("nginx logged %d requests, the client sent %d; want the same", logged, sent)
		}
	}
}
