//go:build drills

package redisretry_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry/internal/paymentsim"
	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
)

// Two payment-service instances on a store with WaitReplicas 2, over a
// primary with two replicas behind three sentinels, keyed orders through
// httpretry with 30% of the answers dropped after the charge, and a
// Sentinel switchover once a third of the orders are charged: the old
// primary takes writes for a while with the other replica attached. No
// order is charged twice, every order answered 201 was charged once, and
// reconciling the failed orders with their keys (again after the lock
// TTL for keys the switchover left locked) leaves one charge per order. (With WaitReplicas 1 the store refuses every write on this
// set-up: see TestDrillSentinelSwitchoverWithTwoReplicasLosesNoAcknowledgedReservation.)
func TestDrillPaymentsThroughATwoReplicaSwitchoverChargeNoOrderTwice(t *testing.T) {
	const orders, workers = 900, 32
	const attemptTimeout = 300 * time.Millisecond
	set := redistest.StartSentinelReplicas(t, 2)
	old, err := set.Primary()
	if err != nil {
		t.Fatal(err)
	}
	backend := paymentsim.Backend{Sentinel: set.FailoverOptions(), WaitReplicas: 2, LockTTL: 3 * time.Second}
	f, err := paymentsim.StartFleet(backend, "payments:", paymentsim.Faults{
		Salt: 1, ResetPerMille: 50, DropPerMille: 300, DelayPerMille: 100, DelayBy: attemptTimeout + 200*time.Millisecond,
	}, patientRedis)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	client, keys := paymentsim.NewOrderClient(attemptTimeout, workers)
	defer client.CloseIdleConnections()

	switched := make(chan error, 1)
	go func() {
		for f.Provider.Total() < orders/3 {
			time.Sleep(time.Millisecond)
		}
		switched <- set.Failover()
	}()
	ctx := context.Background()
	results := paymentsim.PlaceOrders(ctx, client, f.Front.URL, orders, workers)
	if err := <-switched; err != nil {
		t.Fatal(err)
	}
	f.Front.Close() // waits for the injector's requests: every charge is in
	if p, err := set.Primary(); err != nil || p == old {
		t.Fatalf("primary after the switchover = %v, %v; want another than %s", p, err, old.Addr())
	}
	sum := paymentsim.Summarize(results)
	t.Logf("orders %d: succeeded %d, final %v, statuses %v, other %d; events: %v", sum.Orders, sum.Succeeded, sum.Final, sum.Statuses, sum.Other, f.Events)
	if n := f.Provider.Doubles(); n != 0 {
		t.Fatalf("%d orders charged more than once", n)
	}
	chargedFailures := 0
	for _, r := range results {
		n := f.Provider.Charges(r.Order)
		if r.Err != nil || r.Status != http.StatusCreated {
			chargedFailures += n
			continue
		}
		if n != 1 {
			t.Errorf("%s: answered 201, charged %d times; want once", r.Order, n)
		}
	}
	if got, want := f.Provider.Total(), int64(sum.Succeeded+chargedFailures); got != want {
		t.Errorf("charges = %d, want %d: %d answered 201 plus %d failed after their charge", got, want, sum.Succeeded, chargedFailures)
	}
	rec := paymentsim.Reconcile(ctx, f.Instances[0].URL, results, keys)
	if len(rec.Failed) != 0 {
		// Keys a write cut off by the switchover left locked on the new
		// primary (a refused reservation's undo, a Release, lost with the
		// old primary): once the lock expired, a retry takes them over,
		// and must charge only what was not charged.
		t.Logf("reconciliation: %d replayed, %d charged, %d still locked", rec.Replayed, rec.Charged, len(rec.Failed))
		time.Sleep(backend.LockTTL + time.Second)
		rec = paymentsim.Reconcile(ctx, f.Instances[0].URL, paymentsim.Only(results, rec.Failed), keys)
	}
	if len(rec.Failed) != 0 {
		t.Errorf("reconciliation: %d replayed, %d charged, failed %q; want none failed", rec.Replayed, rec.Charged, rec.Failed)
	}
	if got := f.Provider.Total(); got != orders || f.Provider.Doubles() != 0 {
		t.Fatalf("after reconciliation: %d charges (%d orders charged twice), want %d, none twice", got, f.Provider.Doubles(), orders)
	}
}
