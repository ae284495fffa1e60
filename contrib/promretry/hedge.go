package promretry

import (
	"net/http"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/internal/metricsutil"
	"github.com/prometheus/client_golang/prometheus"
)

// hedgeMetrics are the metrics of hedged requests ([httpretry.Hedging]):
// four counters labelled method and route, and the gauge of the current
// hedge delay by latency key, under the label route.
type hedgeMetrics struct {
	sent, won, canceled, refused *prometheus.CounterVec
	delays                       *metricsutil.HedgeDelays
	delay                        *prometheus.Desc
}

func newHedgeMetrics(constLabels prometheus.Labels, maxRoutes int) *hedgeMetrics {
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: constLabels}, []string{"method", "route"})
	}
	return &hedgeMetrics{
		sent: counter("httpretry_hedges_total",
			"Hedges sent: attempts started while an earlier attempt of the operation was still running."),
		won: counter("httpretry_hedges_won_total",
			"Hedged operations whose response was a hedge's."),
		canceled: counter("httpretry_hedge_losers_canceled_total",
			"Attempts still running when another attempt of the operation won, canceled (or left to finish and drained)."),
		refused: counter("httpretry_hedges_refused_total",
			"Hedges not sent because the retry budget or the extra-load cap refused them."),
		delays: metricsutil.NewHedgeDelays(maxRoutes),
		delay: prometheus.NewDesc("httpretry_hedge_delay_seconds",
			"The delay after which a request would be hedged now, by latency key (the host unless Hedging.Key names routes); absent until the adaptive delay has enough latencies.",
			[]string{"route"}, constLabels),
	}
}

// collectors returns what New registers.
func (h *hedgeMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{h.sent, h.won, h.canceled, h.refused, h}
}

// Describe and Collect make the delay gauge a collector of its own, read
// at every scrape.
func (h *hedgeMetrics) Describe(ch chan<- *prometheus.Desc) { ch <- h.delay }

func (h *hedgeMetrics) Collect(ch chan<- prometheus.Metric) {
	h.delays.Each(func(key string, d time.Duration) {
		ch <- prometheus.MustNewConstMetric(h.delay, prometheus.GaugeValue, d.Seconds(), key)
	})
}

// record counts the hedges of one operation, and notes its latency key
// for the delay gauge. An operation that did not hedge costs a few
// comparisons; a hedged one looks its series up by label values.
func (h *hedgeMetrics) record(req *http.Request, method, route string, o httpretry.Outcome) {
	h.delays.Seen(req)
	sent, won, canceled, refused := metricsutil.HedgeCounts(o)
	if sent+won+canceled+refused == 0 {
		return
	}
	for _, c := range []struct {
		vec *prometheus.CounterVec
		n   int
	}{{h.sent, sent}, {h.won, won}, {h.canceled, canceled}, {h.refused, refused}} {
		if c.n > 0 {
			c.vec.WithLabelValues(method, route).Add(float64(c.n))
		}
	}
}
