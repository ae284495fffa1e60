package promretry_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/contrib/promretry"
	"github.com/prometheus/client_golang/prometheus"
)

// A server that fails once; the Collector counts one operation, an
// initial attempt that got a 5xx and a retry that succeeded, each counted
// when it started and again, with its result, when it ended.
func Example() {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	}))
	defer srv.Close()

	reg := prometheus.NewRegistry()
	metrics, err := promretry.New(reg, promretry.Options{
		Route: func(*http.Request) string { return "/books/{id}" },
	})
	if err != nil {
		log.Fatal(err)
	}
	t := metrics.Instrumented(&httpretry.Transport{Jitter: func(time.Duration) time.Duration { return 0 }})
	defer t.CloseIdleConnections()

	resp, err := (&http.Client{Transport: t}).Get(srv.URL + "/books/b1")
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()

	families, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range families {
		if f.GetType().String() != "COUNTER" {
			continue
		}
		for _, m := range f.GetMetric() {
			fmt.Print(f.GetName(), " ")
			for _, l := range m.GetLabel() {
				fmt.Printf("%s=%s ", l.GetName(), l.GetValue())
			}
			fmt.Println(m.GetCounter().GetValue())
		}
	}
	// Output:
	// httpretry_attempt_successes_total kind=retry method=GET route=/books/{id} 1
	// httpretry_attempts_started_total kind=initial method=GET route=/books/{id} 1
	// httpretry_attempts_started_total kind=retry method=GET route=/books/{id} 1
	// httpretry_attempts_total kind=initial method=GET result=5xx route=/books/{id} 1
	// httpretry_attempts_total kind=retry method=GET result=success route=/books/{id} 1
	// httpretry_operations_total method=GET outcome=success reason=final route=/books/{id} 1
	// httpretry_route_overflows_total 0
}
