package redisretry

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry"
)

// TestFleetOfTransports runs several Transports, each with a budget of its
// own on one key, against a server that always answers 503: the fleet
// together sends the capacity's retries, not one capacity per process.
func TestFleetOfTransports(t *testing.T) {
	t.Parallel()
	_, rdb := server(t)
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)

	const (
		processes  = 4
		operations = 10 // per process
		capacity   = 5
	)
	var reasons sync.Map // StopReason -> *atomic.Int64
	var wg sync.WaitGroup
	for range processes {
		b := newBudget(t, rdb, "e2e", capacity, 0, Options{CallTimeout: patient})
		base := &http.Transport{}
		t.Cleanup(base.CloseIdleConnections)
		client := &http.Client{Transport: &httpretry.Transport{
			Base:      base,
			Budget:    b,
			BaseDelay: time.Millisecond,
			Jitter:    func(time.Duration) time.Duration { return 0 },
			OnDone: func(_ *http.Request, o httpretry.Outcome) {
				n, _ := reasons.LoadOrStore(o.Reason, new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
			},
		}}
		wg.Go(func() {
			for range operations {
				resp, err := client.Get(srv.URL)
				if err != nil {
					t.Errorf("Get: %v", err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusServiceUnavailable {
					t.Errorf("status %d; want 503", resp.StatusCode)
				}
			}
		})
	}
	wg.Wait()
	// Every operation makes its first attempt; the fleet shares 5 retries.
	// Budgets of one process each would have allowed 4·5.
	if got, want := hits.Load(), int64(processes*operations+capacity); got != want {
		t.Fatalf("server hits = %d; want %d operations + %d retries = %d", got, processes*operations, capacity, want)
	}
	count := func(r httpretry.StopReason) int64 {
		n, ok := reasons.Load(r)
		if !ok {
			return 0
		}
		return n.(*atomic.Int64).Load()
	}
	// An operation whose retry was granted and failed again asks for
	// another: 5 retries end at most 5 operations on their attempt limit
	// or the budget, the rest stop on the budget at once.
	if got := count(httpretry.BudgetExhausted) + count(httpretry.AttemptsExhausted); got != processes*operations {
		t.Fatalf("operations ended by the budget or attempt limit = %d; want %d", got, processes*operations)
	}
}
