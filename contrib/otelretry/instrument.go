package otelretry

import (
	"errors"
	"net/http"

	"github.com/httpretry/httpretry"
)

// Instrument reports t's operations as metrics and traces in one call:
//
//	tr := &httpretry.Transport{Base: otelhttp.NewTransport(otelretry.Attempts(http.DefaultTransport))}
//	rt, err := otelretry.Instrument(tr, otelretry.Options{Route: routeOf})
//	client := &http.Client{Transport: rt}
//
// It creates [Metrics] and returns a [Transport] that wraps a copy of t
// ([httpretry.Transport.Clone]: t's settings, sharing its connection pool
// and retry budget, its default ones included) whose OnAttemptStart,
// OnAttempt, OnWait and OnDone call the hooks t had first, then record the
// metrics and the retry events. The returned Transport must be the
// RoundTripper the client uses: it starts each operation's span.
//
// Instrument never changes t, so t may already be in use, and each call
// counts once: instrumenting one Transport twice gives two RoundTrippers,
// not doubled counts. Options left unset are taken from t: MaxAttempts,
// and Budget: the budget t's operations use
// ([httpretry.Transport.EffectiveBudget]).
//
// For metrics without traces, create [NewMetrics] and set a Transport's
// hooks to its methods instead.
func Instrument(t *httpretry.Transport, opts Options) (*Transport, error) {
	if t == nil {
		return nil, errors.New("otelretry: Instrument: nil Transport")
	}
	fromTransport(t, &opts)
	m, err := NewMetrics(opts)
	if err != nil {
		return nil, err
	}
	it := t.Clone()
	w := Wrap(it, opts)
	it.OnAttemptStart = chainStart(it.OnAttemptStart, m.OnAttemptStart)
	it.OnAttempt = chainAttempt(it.OnAttempt, m.OnAttempt, w.OnAttempt)
	it.OnWait = chainWait(it.OnWait, m.OnWait)
	it.OnDone = chainDone(it.OnDone, m.OnDone)
	m.ObserveHedgeDelay(it)
	return w, nil
}

// fromTransport fills the options opts leaves unset from t.
func fromTransport(t *httpretry.Transport, opts *Options) {
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = t.MaxAttempts
	}
	if opts.Budget == nil {
		opts.Budget = t.EffectiveBudget()
	}
}

func chainAttempt(prev, a, b func(*http.Request, httpretry.Attempt)) func(*http.Request, httpretry.Attempt) {
	if prev == nil {
		return func(req *http.Request, at httpretry.Attempt) { a(req, at); b(req, at) }
	}
	return func(req *http.Request, at httpretry.Attempt) { prev(req, at); a(req, at); b(req, at) }
}

func chainStart(prev, s func(*http.Request, int)) func(*http.Request, int) {
	if prev == nil {
		return s
	}
	return func(req *http.Request, n int) { prev(req, n); s(req, n) }
}

func chainWait(prev, w func(*http.Request, httpretry.Wait)) func(*http.Request, httpretry.Wait) {
	if prev == nil {
		return w
	}
	return func(req *http.Request, wt httpretry.Wait) { prev(req, wt); w(req, wt) }
}

func chainDone(prev, d func(*http.Request, httpretry.Outcome)) func(*http.Request, httpretry.Outcome) {
	if prev == nil {
		return d
	}
	return func(req *http.Request, o httpretry.Outcome) { prev(req, o); d(req, o) }
}
