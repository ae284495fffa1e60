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
// It creates [Metrics] and chains their hooks (OnAttemptStart, OnAttempt,
// OnDone), and the OnAttempt hook of
// the returned [Transport], after the OnAttempt and OnDone hooks t
// already has (those run first). The returned Transport wraps t and must
// be the RoundTripper the client uses: it starts each operation's span.
//
// Options left unset are taken from t: MaxAttempts, and Budget: the
// budget t's operations use, its default one included
// ([httpretry.Transport.EffectiveBudget]).
//
// Instrument changes t's fields, so it must be called before t's first
// use. For metrics without traces, create [NewMetrics] and set t's hooks
// to its methods instead.
func Instrument(t *httpretry.Transport, opts Options) (*Transport, error) {
	if t == nil {
		return nil, errors.New("otelretry: Instrument: nil Transport")
	}
	fromTransport(t, &opts)
	m, err := NewMetrics(opts)
	if err != nil {
		return nil, err
	}
	w := Wrap(t, opts)
	t.OnAttemptStart = chainStart(t.OnAttemptStart, m.OnAttemptStart)
	t.OnAttempt = chainAttempt(t.OnAttempt, m.OnAttempt, w.OnAttempt)
	t.OnDone = chainDone(t.OnDone, m.OnDone)
	m.ObserveHedgeDelay(t)
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

func chainDone(prev, d func(*http.Request, httpretry.Outcome)) func(*http.Request, httpretry.Outcome) {
	if prev == nil {
		return d
	}
	return func(req *http.Request, o httpretry.Outcome) { prev(req, o); d(req, o) }
}
