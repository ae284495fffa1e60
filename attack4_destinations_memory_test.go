package httpretry

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"

	"github.com/httpretry/httpretry/throttle"
)

// TestAttack4DestinationsMemoryBoundedWhateverTheHosts: a service that
// calls URLs its users give (webhooks) with the zero Throttle. The
// destinations are bounded (MaxKeys 1024, "each distinct key holds about
// a kilobyte of state"; desttable: "the memory it holds is bounded
// whatever keys the requests name"), but a host's spelling is kept as
// the request wrote it, twice (the spelling and the canonical key), with
// no bound on its length: 3072 requests to distinct hosts of 16 KiB
// (never a DNS name: a name has at most 253 bytes) keep about 80 MiB
// after the requests are gone. The Base answers without dialing, as a
// proxy or a test Base does; http.Transport would refuse the name only
// after the throttle has stored it.
func TestAttack4DestinationsMemoryBoundedWhateverTheHosts(t *testing.T) {
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return response(req, 200, ""), nil
	})
	th := &throttle.Throttle{}
	tr := &Transport{Base: base, MaxAttempts: 1, Throttle: th}
	label := strings.Repeat("a", 63) + "."
	long := strings.Repeat(label, 16<<10/len(label))
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range 3 * DefaultMaxDestinations {
		req := newRequest(t, context.Background(), "GET", "http://x.test/", nil)
		req.URL = &url.URL{Scheme: "http", Host: fmt.Sprintf("h%d.%s", i, long), Path: "/"}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	if grown > 16<<20 {
		t.Errorf("after %d requests to distinct 16 KiB hosts, the Throttle keeps %d MiB ; want a bound near MaxKeys × about a kilobyte (Throttle.Key: each distinct key holds about a kilobyte of state; desttable: the memory it holds is bounded whatever keys the requests name)", 3*DefaultMaxDestinations, grown>>20)
	}
	runtime.KeepAlive(th)
}
