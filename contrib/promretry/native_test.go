package promretry

import (
	"net/http/httptest"
	"testing"

	"github.com/httpretry/httpretry"
)

// TestNativeHistograms: with the option, every histogram is a native one
// too (a schema and sparse buckets, bucket factor 1.1: schema 3), beside
// its classic buckets; without it, classic buckets only.
func TestNativeHistograms(t *testing.T) {
	for _, native := range []bool{false, true} {
		c, reg := newCollector(t, Options{NativeHistograms: native})
		req := httptest.NewRequest("GET", "http://api.test/", nil)
		c.OnAttempt(req, httpretry.Attempt{Number: 1, Status: 200, Duration: 20 * ms})
		c.OnDone(req, httpretry.Outcome{Attempts: 1, Reason: httpretry.Final, Status: 200, Elapsed: 20 * ms})
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		histograms := 0
		for _, f := range fams {
			for _, m := range f.GetMetric() {
				h := m.GetHistogram()
				if h == nil {
					continue
				}
				histograms++
				if got := h.Schema != nil; got != native {
					t.Errorf("native %v: %s has a schema: %v", native, f.GetName(), got)
				}
				if native && (h.GetSchema() != 3 || len(h.GetBucket()) == 0) {
					t.Errorf("%s: schema %d, %d classic buckets; want schema 3 and the classic buckets kept",
						f.GetName(), h.GetSchema(), len(h.GetBucket()))
				}
			}
		}
		if histograms != 4 { // attempts, wait, operation and attempt duration
			t.Errorf("native %v: %d histograms; want 4", native, histograms)
		}
	}
}
