package redisretry_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/contrib/redisretry"
	"github.com/httpretry/httpretry/contrib/redisretry/internal/paymentsim"
	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/httpretry/httpretry/idempotency"
	"github.com/redis/go-redis/v9"
)

// patientRedis bounds the Redis calls of the tests whose verdict is not
// about Redis being slow: no loaded machine reaches it.
const patientRedis = time.Minute

// The payment-authorization proof: orders placed through httpretry, a
// fault injector that resets connections before the request reaches the
// service (5%), drops the response after the charge committed (30%) and
// holds it past the attempt timeout (10%), two instances of the payment
// service sharing one Redis store. No order is charged twice; every
// order answered 201 was charged exactly once; every other order failed
// with an *httpretry.Error; and reconciling those with their key charges
// the ones that were not charged and replays the ones that were, so that
// in the end charges equal orders. None of it depends on timing: a slow
// machine only turns more attempts into retries.
func TestPaymentsUnderFaults(t *testing.T) {
	srv := redistest.Start(t)
	paymentsProof(t, paymentsim.Backend{Addr: srv.Addr()}, 400)
}

// The same proof, smaller, against a Redis Cluster of three masters: each
// order's records live on the master of its key's slot, and still no
// order is charged twice.
func TestPaymentsUnderFaultsOnCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3, 0)
	paymentsProof(t, paymentsim.Backend{ClusterAddrs: c.Addrs()}, 200)
}

// The same proof, smaller, with the services reaching Redis through a
// proxy that loses 5% of Redis's replies after Redis ran the command:
// go-redis sends each such command again, and no script applies twice,
// so Reserve, Complete and Release still answer as if delivered once (no
// orphaned lock, no fenced response, no store error).
func TestPaymentsUnderFaultsAndLostRedisReplies(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	proxy.LoseRate("", 50, 1)
	paymentsProof(t, paymentsim.Backend{Addr: proxy.Addr()}, 200)
	if n := proxy.Lost(); n < 10 {
		t.Fatalf("Redis replies lost = %d; want about 5%% of the commands", n)
	}
	t.Logf("Redis replies lost after the command ran: %d", proxy.Lost())
}

// paymentsProof places orders through the fault injector to a fleet on
// backend, and checks every charge as described above.
func paymentsProof(t *testing.T, backend paymentsim.Backend, orders int) {
	t.Helper()
	const workers = 32
	const attemptTimeout = 300 * time.Millisecond
	f, err := paymentsim.StartFleet(backend, "payments:", paymentsim.Faults{
		Salt: 1, ResetPerMille: 50, DropPerMille: 300, DelayPerMille: 100, DelayBy: attemptTimeout + 200*time.Millisecond,
		// 1.2s leaves a retry 0.9s after the attempt timeout to meet the
		// charge in progress, and a second one after Retry-After 1 time to
		// find it recorded.
		SlowPerMille: 20, SlowBy: 1200 * time.Millisecond,
	}, patientRedis)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	client, keys := paymentsim.NewOrderClient(attemptTimeout, workers)
	defer client.CloseIdleConnections()

	ctx := context.Background()
	results := paymentsim.PlaceOrders(ctx, client, f.Front.URL, orders, workers)
	f.Front.Close() // waits for the injector's requests: every charge is in
	sum := paymentsim.Summarize(results)
	t.Logf("orders %d: succeeded %d, unknown %d, final %v, statuses %v, other %d; faults: reset %d, drop %d, delay %d, pass %d; events: %v",
		sum.Orders, sum.Succeeded, sum.Unknown, sum.Final, sum.Statuses, sum.Other,
		f.Injector.Count(paymentsim.Reset), f.Injector.Count(paymentsim.Drop), f.Injector.Count(paymentsim.Delay),
		f.Injector.Count(paymentsim.Pass), f.Events)

	if sum.Other != 0 {
		t.Errorf("%d orders failed without an *httpretry.Error", sum.Other)
	}
	for status, n := range sum.Statuses {
		if status != http.StatusConflict {
			t.Errorf("%d orders answered %d, want 201, or 409 while the first attempt runs", n, status)
		}
	}
	if n := f.Provider.Doubles(); n != 0 {
		t.Fatalf("%d orders charged more than once", n)
	}
	chargeIDs := map[int64]string{}
	chargedFailures := 0
	for _, r := range results {
		if r.Err != nil || r.Status != http.StatusCreated {
			chargedFailures += f.Provider.Charges(r.Order)
			continue
		}
		if n := f.Provider.Charges(r.Order); n != 1 || r.Charge.Order != r.Order {
			t.Errorf("%s: answered 201 for %q, charged %d times; want its own charge, once", r.Order, r.Charge.Order, n)
		}
		if other, dup := chargeIDs[r.Charge.ChargeID]; dup {
			t.Errorf("%s and %s got the same charge %d", r.Order, other, r.Charge.ChargeID)
		}
		chargeIDs[r.Charge.ChargeID] = r.Order
	}
	if got, want := f.Provider.Total(), int64(sum.Succeeded+chargedFailures); got != want {
		t.Errorf("charges = %d, want %d: %d answered 201 plus %d failed after their charge", got, want, sum.Succeeded, chargedFailures)
	}
	// Each run of the handler is one charge, and nothing was left unrecorded.
	if got := f.Events.Count(idempotency.KindExecuted); got != f.Provider.Total() {
		t.Errorf("executed events = %d, want one per charge (%d)", got, f.Provider.Total())
	}
	for _, k := range []idempotency.Kind{idempotency.KindFenced, idempotency.KindNotRecorded, idempotency.KindStoreError, idempotency.KindMismatch} {
		if n := f.Events.Count(k); n != 0 {
			t.Errorf("%s events = %d, want 0", k, n)
		}
	}
	for _, fault := range []paymentsim.Fault{paymentsim.Reset, paymentsim.Drop, paymentsim.Delay, paymentsim.Pass} {
		if f.Injector.Count(fault) == 0 {
			t.Errorf("fault %d never injected in %d orders", fault, orders)
		}
	}
	if f.Events.Count(idempotency.KindReplayed) == 0 || f.Events.Count(idempotency.KindConflict) == 0 {
		t.Errorf("events %v: want replays (retries finding a recorded charge) and conflicts (retries meeting a slow charge)", f.Events)
	}

	rec := paymentsim.Reconcile(ctx, f.Instances[0].URL, results, keys)
	if len(rec.Failed) != 0 || rec.Replayed != chargedFailures || rec.Charged != orders-sum.Succeeded-chargedFailures {
		t.Errorf("reconciliation: %d replayed, %d charged, failed %q; want %d replayed, %d charged, none failed",
			rec.Replayed, rec.Charged, rec.Failed, chargedFailures, orders-sum.Succeeded-chargedFailures)
	}
	if got := f.Provider.Total(); got != int64(orders) || f.Provider.Doubles() != 0 {
		t.Fatalf("after reconciliation: %d charges (%d orders charged twice), want %d, none twice", got, f.Provider.Doubles(), orders)
	}
	for i := range orders {
		if n := f.Provider.Charges(paymentsim.OrderID(i)); n != 1 {
			t.Fatalf("%s charged %d times after reconciliation, want 1", paymentsim.OrderID(i), n)
		}
	}
}

// Fifty concurrent POSTs with one key, spread over two instances with
// their own Redis clients: one charge, and fifty identical answers — the
// first and 49 replays, each after a 409 its client retried.
func TestPaymentsDuplicateKey(t *testing.T) {
	const dups = 50
	srv := redistest.Start(t)
	provider := &paymentsim.Provider{}
	events := &paymentsim.Events{}
	// The charge waits until every other request was answered 409, so
	// that all fifty meet the reservation in progress whatever the
	// scheduling; the 30s limit only keeps a broken run from hanging.
	allConflicted := make(chan struct{})
	var conflicts atomic.Int32
	onEvent := func(e idempotency.Event) {
		events.Record(e)
		if e.Kind == idempotency.KindConflict && conflicts.Add(1) == dups-1 {
			close(allConflicted)
		}
	}
	charge := paymentsim.ChargeHandler(provider)
	gated := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-allConflicted:
		case <-time.After(30 * time.Second):
		}
		charge.ServeHTTP(w, r)
	})
	var urls [2]string
	for i := range urls {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, PoolSize: dups, PoolTimeout: patientRedis})
		defer rdb.Close()
		store, err := redisretry.NewIdempotencyStore(rdb, "dup:", redisretry.IdempotencyOptions{CallTimeout: patientRedis})
		if err != nil {
			t.Fatal(err)
		}
		s := httptest.NewServer(idempotency.Handler(gated, store, idempotency.Options{RequireKey: true, OnEvent: onEvent}))
		defer s.Close()
		urls[i] = s.URL
	}

	client := &http.Client{Transport: &httpretry.Transport{
		Base: &http.Transport{}, Timeout: 60 * time.Second, MaxAttempts: 10, Budget: httpretry.Unlimited,
		NewIdempotencyKey: httpretry.RandomKey,
	}}
	defer client.CloseIdleConnections()
	type answer struct {
		status   int
		body     string
		replayed bool
		err      error
	}
	answers := make([]answer, dups)
	var wg sync.WaitGroup
	for i := range dups {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, urls[i%2]+paymentsim.ChargePath, strings.NewReader(`{"order":"order-dup","amount":250}`))
			req.Header.Set(idempotency.KeyHeader, "key-of-order-dup")
			resp, err := client.Do(req)
			if err != nil {
				answers[i] = answer{err: err}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			answers[i] = answer{resp.StatusCode, string(b), resp.Header.Get(idempotency.ReplayedHeader) == "true", err}
		})
	}
	wg.Wait()

	if n := provider.Total(); n != 1 {
		t.Fatalf("charges = %d, want 1", n)
	}
	want := fmt.Sprintf(`{"order":"order-dup","amount":250,"charge_id":1}` + "\n")
	replays := 0
	for i, a := range answers {
		if a.err != nil || a.status != http.StatusCreated || a.body != want {
			t.Errorf("request %d: %d %q, err %v; want 201 %q", i, a.status, a.body, a.err, want)
		}
		if a.replayed {
			replays++
		}
	}
	if replays != dups-1 {
		t.Errorf("replayed answers = %d, want %d", replays, dups-1)
	}
	if got := events.Count(idempotency.KindExecuted); got != 1 {
		t.Errorf("executed events = %d, want 1", got)
	}
	if got := events.Count(idempotency.KindReplayed); got != dups-1 {
		t.Errorf("replayed events = %d, want %d", got, dups-1)
	}
	if got := events.Count(idempotency.KindConflict); got < dups-1 {
		t.Errorf("conflict events = %d, want at least %d", got, dups-1)
	}
}
