package httpretry

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// TestAttack3ThrottleKeepsADestinationInUseAmongOneShotHosts: a
// dispatcher calls many hosts once each (webhooks, a crawler) and one
// host, down, every third call. With MaxKeys 64, a least-recently-used
// table, or its CLOCK approximation that docs/overload.md describes ("a
// destination in constant use is not given up while others come and
// go"), keeps the failing host: it is looked up every 3 new keys out of
// 64. The table's second chance always starts its scan at the same place
// (sync.Map's Range order), so the host in constant use, the only one
// marked, drifts to the front, loses its mark to every scan, and is
// forgotten whenever two new hosts come between its calls: it is never
// throttled.
func TestAttack3ThrottleKeepsADestinationInUseAmongOneShotHosts(t *testing.T) {
	t.Parallel()
	forgotten, worst := 0, 0
	const runs = 10
	for run := range runs {
		fc := clockwork.NewFakeClock()
		base := &countingBase{status: func(r *http.Request) int {
			if r.URL.Host == "down.test" {
				return 503
			}
			return 200
		}}
		tr := &Transport{Base: base, Clock: fc, MaxAttempts: 1, Throttle: &throttle.Throttle{MaxKeys: 64, Rand: evenDraws()}}
		call := func(url string) error { return get(t, tr, url) }
		admitted, n := 0, 0
		for range 2000 {
			for range 2 {
				n++
				call("http://h" + strconv.Itoa(run) + "-" + strconv.Itoa(n) + ".test/")
			}
			if err := call("http://down.test/"); !errors.Is(err, throttle.ErrThrottled) {
				admitted++
			}
			fc.Advance(time.Millisecond)
		}
		if admitted > 400 {
			forgotten++
			worst = max(worst, admitted)
		}
	}
	if forgotten > 0 {
		t.Errorf("in %d of %d runs the host answering only 503, called every third request amid one-shot hosts (MaxKeys 64), was sent %d of 2000 operations (worst); want about 200 (the 90%% cap): docs/overload.md promises a destination in constant use is not given up while others come and go", forgotten, runs, worst)
	}
}

// TestAttack3BudgetPerHostKeepsAFailingHostsBudgetAmongOneShotHosts: the
// same traffic with BudgetPerHost (1024 hosts kept) and retries: the
// failing host, called every third request amid one-shot hosts, should
// drain its own budget (20 tokens plus 0.1 per operation: at most about
// 20 + 0.1·10000 retries over 10000 of its operations). Forgotten and
// "started again full" at every other eviction, it retries nearly every
// operation.
func TestAttack3BudgetPerHostKeepsAFailingHostsBudgetAmongOneShotHosts(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	var downHits int
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if strings.HasPrefix(r.URL.Host, "down.test") {
			downHits++
			return response(r, 503, ""), nil
		}
		return response(r, 200, ""), nil
	})
	tr := &Transport{Base: base, Clock: fc, MaxAttempts: 2, Jitter: noJitter, BudgetPerHost: true}
	n := 0
	const ops = 10000
	for range ops {
		for range 2 {
			n++
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://h"+strconv.Itoa(n)+".test/", nil))
			if err == nil {
				resp.Body.Close()
			}
		}
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://down.test/", nil))
		if err == nil {
			resp.Body.Close()
		}
	}
	if retries := downHits - ops; retries > 20+ops/10+50 {
		t.Errorf("the failing host, called every third request amid one-shot hosts, was retried %d times over %d operations; want at most about %d (its own budget: 20 tokens plus 0.1 per operation); it is forgotten and starts again full while in constant use", retries, ops, 20+ops/10)
	}
}
