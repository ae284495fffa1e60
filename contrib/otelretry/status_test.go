package otelretry

import (
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/httptestutil"
)

// TestDurationsCarryStatusCode: the attempt and operation duration
// histograms carry http.response.status_code when a response came back,
// next to the outcome class and error.type; an error, or a code outside
// 100–599, carries none.
func TestDurationsCarryStatusCode(t *testing.T) {
	m, metrics := newMetrics(t, Options{})
	req := newRequest(t, "GET", "http://api.test/", nil)
	m.OnAttempt(req, httpretry.Attempt{Number: 1, Status: 503, Duration: 40 * ms, Conn: httpretry.ConnNew})
	m.OnAttempt(req, httpretry.Attempt{Number: 2, Err: httptestutil.ErrReset, Duration: 7 * ms, Conn: httpretry.ConnReused})
	m.OnAttempt(req, httpretry.Attempt{Number: 3, Status: 600, Duration: 7 * ms, Conn: httpretry.ConnReused})
	m.OnAttempt(req, httpretry.Attempt{Number: 4, Status: 200, Duration: 7 * ms, Conn: httpretry.ConnReused})
	m.OnDone(req, httpretry.Outcome{Attempts: 4, Reason: httpretry.Final, Status: 200, Elapsed: 2 * time.Second})
	m.OnDone(req, httpretry.Outcome{Attempts: 1, Reason: httpretry.Final, Status: 404, Elapsed: 40 * ms})
	m.OnDone(req, httpretry.Outcome{Attempts: 1, Reason: httpretry.Final, Err: httptestutil.ErrReset, Elapsed: 7 * ms})
	lines := metrics()
	diffLines(t, filter(lines, "httpretry.client.attempt.duration"), []string{
		"httpretry.client.attempt.duration{error.type=5xx,http.response.status_code=503,httpretry.attempt.result=5xx,httpretry.connection=new," + route + "} count=1 sum=0.04 buckets=[0 0 0 1 0 0 0 0 0 0 0 0 0 0 0]",
		"httpretry.client.attempt.duration{error.type=connection_error,httpretry.attempt.result=connection_error,httpretry.connection=reused," + route + "} count=1 sum=0.007 buckets=[0 1 0 0 0 0 0 0 0 0 0 0 0 0 0]",
		"httpretry.client.attempt.duration{error.type=other,httpretry.attempt.result=other,httpretry.connection=reused," + route + "} count=1 sum=0.007 buckets=[0 1 0 0 0 0 0 0 0 0 0 0 0 0 0]",
		"httpretry.client.attempt.duration{http.response.status_code=200,httpretry.attempt.result=success,httpretry.connection=reused," + route + "} count=1 sum=0.007 buckets=[0 1 0 0 0 0 0 0 0 0 0 0 0 0 0]",
	})
	diffLines(t, filter(lines, "httpretry.client.operation.duration"), []string{
		"httpretry.client.operation.duration{error.type=4xx,http.response.status_code=404,httpretry.outcome=error_response," + route + "} count=1 sum=0.04 buckets=[0 0 0 1 0 0 0 0 0 0 0 0 0 0 0]",
		"httpretry.client.operation.duration{error.type=connection_error,httpretry.outcome=error," + route + "} count=1 sum=0.007 buckets=[0 1 0 0 0 0 0 0 0 0 0 0 0 0 0]",
		"httpretry.client.operation.duration{http.response.status_code=200,httpretry.outcome=success," + route + "} count=1 sum=2 buckets=[0 0 0 0 0 0 0 0 1 0 0 0 0 0 0]",
	})
}

// TestStatusCodesCapped: past MaxStatusCodes distinct codes, a duration
// carries no status code, only its class, whatever the route, so the
// codes a server makes up cannot grow the number of series.
func TestStatusCodesCapped(t *testing.T) {
	m, metrics := newMetrics(t, Options{})
	for _, host := range []string{"a.test", "b.test"} {
		req := newRequest(t, "GET", "http://"+host+"/", nil)
		for code := 500; code < 500+MaxStatusCodes+8; code++ {
			m.OnAttempt(req, httpretry.Attempt{Number: 1, Status: code, Duration: 40 * ms})
		}
	}
	codes := map[string]bool{}
	var withCode, without int
	for _, l := range filter(metrics(), "httpretry.client.attempt.duration") {
		i := strings.Index(l, "http.response.status_code=")
		if i < 0 {
			without++
			continue
		}
		withCode++
		codes[l[i:i+len("http.response.status_code=")+3]] = true
	}
	if len(codes) != MaxStatusCodes || withCode != 2*MaxStatusCodes || without != 2 {
		t.Errorf("%d distinct codes on %d series, %d series without a code; want %d on %d, and 2 (one a route) for the rest",
			len(codes), withCode, without, MaxStatusCodes, 2*MaxStatusCodes)
	}
	if codes["http.response.status_code=532"] || !codes["http.response.status_code=531"] {
		t.Errorf("codes %v; want the first %d seen, 500 to 531", codes, MaxStatusCodes)
	}
}

// TestStatusSlotsUnderConcurrency: goroutines meeting codes in different
// orders give out exactly MaxStatusCodes slots, each to one code, and
// every goroutine sees the same slot for a code.
func TestStatusSlotsUnderConcurrency(t *testing.T) {
	var st statusTable
	steps := []int{1, 3, 7, 9, 11, 13, 17, 19} // prime to 500: each visits every code once
	workers := len(steps)
	seen := make([]map[int]int, workers)
	var wg sync.WaitGroup
	for w := range workers {
		seen[w] = map[int]int{}
		wg.Go(func() {
			for i := range 500 {
				code := 100 + (i*steps[w])%500
				if slot, ok := st.slot(code); ok {
					seen[w][code] = slot
				}
			}
		})
	}
	wg.Wait()
	slots := map[int]int{}
	for code, slot := range seen[0] {
		if other, dup := slots[slot]; dup {
			t.Errorf("slot %d given to %d and %d", slot, other, code)
		}
		slots[slot] = code
		if slot < 0 || slot >= MaxStatusCodes {
			t.Errorf("code %d has slot %d; want 0 to %d", code, slot, MaxStatusCodes-1)
		}
	}
	if len(slots) != MaxStatusCodes {
		t.Errorf("%d codes have a slot; want %d", len(slots), MaxStatusCodes)
	}
	for w := 1; w < workers; w++ {
		if !maps.Equal(seen[w], seen[0]) {
			t.Errorf("worker %d saw slots %v; worker 0 saw %v", w, seen[w], seen[0])
		}
	}
	for _, code := range []int{0, 99, 600, 999, -1} {
		if _, ok := st.slot(code); ok {
			t.Errorf("code %d has a slot; want none outside 100–599", code)
		}
	}
}
