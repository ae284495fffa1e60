package otelretry

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/internal/metricsutil"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// keyHedgeKey carries the latency key of the hedge delay gauge: what the
// Transport's [httpretry.Hedging.Key] returns, the request's host and
// port by default; a bounded name, never a raw path.
const keyHedgeKey = "httpretry.hedge.key"

// hedgeInstruments are the instruments of hedged requests
// ([httpretry.Hedging]), listed in the [Metrics] documentation.
type hedgeInstruments struct {
	sent, won, canceled, refused metric.Int64Counter
	delay                        metric.Float64ObservableGauge
	delays                       *metricsutil.HedgeDelays
	reg                          metric.Registration
}

// newHedgeInstruments creates the hedge instruments on meter, keeping the
// delays of at most maxKeys latency keys.
func newHedgeInstruments(meter metric.Meter, maxKeys int) (*hedgeInstruments, error) {
	h := &hedgeInstruments{delays: metricsutil.NewHedgeDelays(maxKeys)}
	var errs [6]error
	h.sent, errs[0] = meter.Int64Counter("httpretry.client.hedges",
		metric.WithUnit("{attempt}"),
		metric.WithDescription("Hedges sent: attempts started while an earlier attempt of the operation was still running."))
	h.won, errs[1] = meter.Int64Counter("httpretry.client.hedges.won",
		metric.WithUnit("{operation}"),
		metric.WithDescription("Hedged operations whose response was a hedge's."))
	h.canceled, errs[2] = meter.Int64Counter("httpretry.client.hedges.losers_canceled",
		metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts still running when another attempt of the operation won, canceled (or left to finish and drained)."))
	h.refused, errs[3] = meter.Int64Counter("httpretry.client.hedges.refused",
		metric.WithUnit("{attempt}"),
		metric.WithDescription("Hedges not sent because the retry budget or the extra-load cap refused them."))
	h.delay, errs[4] = meter.Float64ObservableGauge("httpretry.client.hedge.delay",
		metric.WithUnit("s"),
		metric.WithDescription("The delay after which a request would be hedged now, by latency key; absent until the adaptive delay has enough latencies."))
	if errs[4] == nil {
		h.reg, errs[5] = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
			h.delays.Each(func(key string, d time.Duration) {
				o.ObserveFloat64(h.delay, d.Seconds(), metric.WithAttributes(attribute.String(keyHedgeKey, key)))
			})
			return nil
		}, h.delay)
	}
	return h, errors.Join(errs[:]...)
}

// ObserveHedgeDelay makes the httpretry.client.hedge.delay gauge report
// t's current hedge delay for every latency key its requests use, when t
// hedges. [Instrument] calls it; call it yourself when you set t's hooks
// to the Metrics' methods.
func (m *Metrics) ObserveHedgeDelay(t *httpretry.Transport) {
	m.hedges.delays.Watch(t)
}

// recordHedges counts the hedges of one operation and notes its latency
// key for the delay gauge. An operation that did not hedge costs a few
// comparisons; a hedged one builds its attribute set.
func (m *Metrics) recordHedges(ctx context.Context, req *http.Request, ms *methodSeries, o httpretry.Outcome) {
	h := m.hedges
	h.delays.Seen(req)
	sent, won, canceled, refused := metricsutil.HedgeCounts(o)
	if sent+won+canceled+refused == 0 {
		return
	}
	opts := newAddOpts(attribute.String(keyMethod, ms.method), ms.route)
	for _, c := range []struct {
		ctr metric.Int64Counter
		n   int
	}{{h.sent, sent}, {h.won, won}, {h.canceled, canceled}, {h.refused, refused}} {
		if c.n > 0 {
			c.ctr.Add(ctx, int64(c.n), opts...)
		}
	}
}
