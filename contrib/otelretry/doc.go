// Package otelretry reports the operations of an [httpretry.Transport] to
// OpenTelemetry: metrics through a MeterProvider, and one span per
// operation through a TracerProvider, with the attempts' own spans (from
// otelhttp) nested under it.
//
// Most programs need one call:
//
//	tr := &httpretry.Transport{Base: otelhttp.NewTransport(otelretry.Attempts(http.DefaultTransport))}
//	rt, err := otelretry.Instrument(tr, otelretry.Options{Route: routeTemplate})
//	client := &http.Client{Transport: rt}
//
// [Instrument] leaves tr unchanged: it returns a [Transport] that starts
// each operation's span before the first attempt, around a copy of tr
// whose hooks record [Metrics] after running any tr already has. [Attempts], placed inside
// otelhttp, sets http.request.resend_count on each retry's client span.
// For metrics alone, set the Transport's OnAttemptStart, OnAttempt,
// OnWait and OnDone to the methods of [NewMetrics]' result.
//
// Every attribute value comes from a fixed table, except the route and
// the duration histograms' status code, whose distinct values are capped
// (see [Options] and [MaxStatusCodes]): no path, query string,
// userinfo, header or body ever becomes an attribute of a metric or of the
// operation span. Recording a metric allocates nothing once its label
// combination has been seen.
package otelretry
