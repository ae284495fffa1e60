package pgidempotency

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/idempotency"
)

// TestTxDatabaseCrashMidTrafficChargesEachOrderOnce: PostgreSQL stops at
// once (immediate mode, every connection cut, transactions and COMMITs in
// flight) and starts again while keyed orders, three concurrent
// duplicates each, go through httpretry (whose retry budget may give up
// during the outage: such an order is sent again with its key afterwards,
// as a client reconciles). Every order ends charged exactly once, and
// every 2xx any client got is what the key replays afterwards.
func TestTxDatabaseCrashMidTrafficChargesEachOrderOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts the shared PostgreSQL server: seconds")
	}
	f := newFixture(t, Options{Timeout: 2 * time.Second}, false)
	srv := f.serve(chargeHandler, idempotency.Options{LockTTL: time.Second})
	trafficThroughAnOutage(t, f, srv.URL, server.Restart)
}

// trafficThroughAnOutage sends keyed orders, three concurrent duplicates
// each, through httpretry, runs outage a third of the way through, and
// then checks the rules: every order is confirmed (an order whose client
// gave up is sent again with its key, as a client reconciles), charged
// exactly once, and every 2xx any client got is what its key replays.
func trafficThroughAnOutage(t *testing.T, f *fixture, url string, outage func() error) {
	t.Helper()
	client := &http.Client{Transport: &httpretry.Transport{MaxAttempts: 60, Timeout: 90 * time.Second}}
	const orders = 60
	var mu sync.Mutex
	seen := map[int]map[string]bool{}
	send := func(i int) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(fmt.Sprintf(`{"id":"o-%d","amount":%d}`, i, i)))
		req.Header.Set("Idempotency-Key", fmt.Sprintf("k-%d", i))
		resp, err := client.Do(req)
		if err != nil {
			return // reconciled below
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusCreated {
			return // reconciled below
		}
		mu.Lock()
		defer mu.Unlock()
		if seen[i] == nil {
			seen[i] = map[string]bool{}
		}
		seen[i][string(b)] = true
	}
	var wg sync.WaitGroup
	outageDone := make(chan error, 1)
	for i := range orders {
		if i == orders/3 {
			go func() { outageDone <- outage() }()
		}
		for range 3 {
			wg.Go(func() { send(i) })
		}
		time.Sleep(10 * time.Millisecond)
	}
	wg.Wait()
	if err := <-outageDone; err != nil {
		t.Fatal(err)
	}
	for i := range orders {
		var a answer
		waitFor(t, 60*time.Second, fmt.Sprintf("order %d never confirmed", i), func() bool {
			a = post(t, url, fmt.Sprintf("k-%d", i), order{ID: fmt.Sprintf("o-%d", i), Amount: i})
			return a.status == http.StatusCreated
		})
	}
	for i := range orders {
		if got := f.charges(fmt.Sprintf("o-%d", i)); got != 1 {
			t.Errorf("order %d charged %d times, want 1", i, got)
		}
		a := post(t, url, fmt.Sprintf("k-%d", i), order{ID: fmt.Sprintf("o-%d", i), Amount: i})
		if a.status != http.StatusCreated {
			t.Errorf("order %d: replay %d %q", i, a.status, a.body)
			continue
		}
		mu.Lock()
		for b := range seen[i] {
			if b != string(a.body) {
				t.Errorf("order %d: a client got %q, the key replays %q", i, b, a.body)
			}
		}
		mu.Unlock()
	}
}

// TestTxDatabasePausedMidTrafficChargesEachOrderOnce: every process of
// PostgreSQL is stopped (SIGSTOP: connections open, nothing answers) for
// three times the store's Timeout, longer than the lock, while orders go
// through httpretry; then it continues. Statements and COMMITs in flight
// meet the Timeout (a COMMIT's outcome is then unknown) and locks expire
// meanwhile by the database's clock, which a paused server does not see
// pass until it continues. Every order ends charged exactly once, and
// every 2xx any client got is what its key replays.
func TestTxDatabasePausedMidTrafficChargesEachOrderOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("pauses the shared PostgreSQL server: seconds")
	}
	const timeout = time.Second
	f := newFixture(t, Options{Timeout: timeout}, false)
	srv := f.serve(chargeHandler, idempotency.Options{LockTTL: timeout / 2})
	trafficThroughAnOutage(t, f, srv.URL, func() error {
		resume, err := server.Pause()
		if err != nil {
			return err
		}
		time.Sleep(3 * timeout)
		return resume()
	})
}
