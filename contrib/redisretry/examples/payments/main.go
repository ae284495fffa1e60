// Command payments is the payment-authorization proof as a program: it
// starts its own redis-server on a free loopback port, two instances of a
// payment service whose charge endpoint is an idempotency.Handler over one
// shared redisretry.IdempotencyStore, a fault injector in front of them
// and a fake card provider behind them; places orders through an
// httpretry client with a random Idempotency-Key per order; reconciles
// the orders that failed by sending them again with their key; and
// prints the counts. Then it does it all again with the services reaching
// Redis through a proxy that loses -lost-replies percent of Redis's
// replies after Redis ran the command, which go-redis answers by sending
// the command again. With -cluster it does it a third time with the
// store on a Redis Cluster of three masters it starts, each order's
// records on the master of its key's slot. With -switchover it does it
// once more with the store on a primary with two replicas behind three
// sentinels, IdempotencyOptions.WaitReplicas 2, and a Sentinel switchover
// (SENTINEL FAILOVER, the old primary taking writes for a while with the
// other replica attached) once a third of the orders are charged. It
// exits 1 if any order was charged twice, or if charges and confirmed
// orders differ, in any run.
//
//	make demo-payments
//	cd contrib/redisretry && go run ./examples/payments -orders 10000 -lost-replies 5 -cluster -switchover
//
// Everything listens on 127.0.0.1 and stops when the program ends.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry/internal/paymentsim"
	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/httpretry/httpretry/idempotency"
	"github.com/redis/go-redis/v9"
)

func main() {
	orders := flag.Int("orders", 10000, "orders to place")
	workers := flag.Int("workers", 64, "orders in flight at once")
	salt := flag.Uint64("salt", 1, "selects the fault decisions, which are fixed per order and attempt")
	attemptTimeout := flag.Duration("attempt-timeout", 300*time.Millisecond, "the client's AttemptTimeout; delayed responses are held 200ms longer")
	lost := flag.Float64("lost-replies", 5, "percent of Redis replies lost after Redis ran the command, in the second run; 0 skips that run")
	cluster := flag.Bool("cluster", false, "run once more with the store on a Redis Cluster of three masters")
	switchover := flag.Bool("switchover", false, "run once more with the store on a primary with two replicas behind sentinels, switched over mid-run")
	flag.Parse()
	if err := run(os.Stdout, config{*orders, *workers, *salt, *attemptTimeout, *lost, *cluster, *switchover}); err != nil {
		fmt.Fprintln(os.Stderr, "payments:", err)
		os.Exit(1)
	}
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// config is the command line.
type config struct {
	orders, workers int
	salt            uint64
	attemptTimeout  time.Duration
	lostPercent     float64
	cluster         bool
	switchover      bool
}

func run(out io.Writer, c config) error {
	if c.orders <= 0 || c.workers <= 0 || c.attemptTimeout <= 0 || c.lostPercent < 0 || c.lostPercent > 100 {
		return fmt.Errorf("-orders, -workers and -attempt-timeout must be positive, -lost-replies within [0, 100]")
	}
	redis.SetLogger(quiet{})
	srv, err := redistest.New()
	if err != nil {
		return err
	}
	defer srv.Close()
	fmt.Fprintf(out, "== run 1: redis-server on %s, every reply delivered\n", srv.Addr())
	if err := pass(out, paymentsim.Backend{Addr: srv.Addr()}, "payments:", c, nil); err != nil {
		return err
	}
	if err := lossyRun(out, srv, c); err != nil {
		return err
	}
	if err := clusterRun(out, c); err != nil {
		return err
	}
	return switchoverRun(out, c)
}

// clusterRun is the run on a Redis Cluster of three masters; none
// without -cluster.
func clusterRun(out io.Writer, c config) error {
	if !c.cluster {
		return nil
	}
	cluster, err := redistest.NewCluster(3, 0)
	if err != nil {
		return err
	}
	defer cluster.Close()
	fmt.Fprintf(out, "\n== run 3: a Redis Cluster of three masters (%v), every reply delivered; each order's records on the master of its key's slot\n", cluster.Addrs())
	return pass(out, paymentsim.Backend{ClusterAddrs: cluster.Addrs()}, "payments-cluster:", c, nil)
}

// switchoverRun is the run on a primary with two replicas behind three
// sentinels, switched over once a third of the orders are charged; none
// without -switchover.
func switchoverRun(out io.Writer, c config) error {
	if !c.switchover {
		return nil
	}
	set, err := redistest.NewSentinelReplicas(2)
	if err != nil {
		return err
	}
	defer set.Close()
	old, err := set.Primary()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n== run 4: a primary (%s) with two replicas behind three sentinels, IdempotencyOptions.WaitReplicas 2; "+
		"SENTINEL FAILOVER once %d orders are charged, the old primary taking writes until the sentinels make it a replica\n", old.Addr(), c.orders/3)
	var took time.Duration
	amid := func(f *paymentsim.Fleet) func() error {
		done := make(chan error, 1)
		go func() {
			for f.Provider.Total() < int64(c.orders/3) {
				time.Sleep(time.Millisecond)
			}
			start := time.Now()
			err := set.Failover()
			took = time.Since(start)
			done <- err
		}()
		return func() error { return <-done }
	}
	// A lock left on the new primary by a write the switchover cut off
	// (a reservation refused or a Release lost on the old primary)
	// expires after LockTTL, 3s here rather than a minute, so that the
	// run reconciles those orders again after it.
	backend := paymentsim.Backend{Sentinel: set.FailoverOptions(), WaitReplicas: 2, LockTTL: 3 * time.Second}
	if err := pass(out, backend, "payments-switchover:", c, amid); err != nil {
		return err
	}
	promoted, err := set.Primary()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "switchover: %s promoted in place of %s, %v until the set-up was whole again\n", promoted.Addr(), old.Addr(), took.Round(time.Millisecond))
	if promoted == old {
		return fmt.Errorf("the sentinels still name %s primary", old.Addr())
	}
	return nil
}

// lossyRun is the run through a proxy that loses c.lostPercent of
// Redis's replies; none when it is 0.
func lossyRun(out io.Writer, srv *redistest.Server, c config) error {
	if c.lostPercent == 0 {
		return nil
	}
	proxy, err := redistest.NewProxy(srv.Addr())
	if err != nil {
		return err
	}
	defer proxy.Close()
	proxy.LoseRate("", int(math.Round(c.lostPercent*10)), c.salt)
	fmt.Fprintf(out, "\n== run 2: the services reach Redis through %s, which loses %v%% of Redis's replies after Redis ran the command (go-redis sends it again; a reply is lost at most once)\n",
		proxy.Addr(), c.lostPercent)
	err = pass(out, paymentsim.Backend{Addr: proxy.Addr()}, "payments-lost-replies:", c, nil)
	fmt.Fprintf(out, "Redis replies lost after the command ran: %d\n", proxy.Lost())
	return err
}

// pass places the orders once with the store on backend, reconciles the
// failed ones and checks the charges. amid, when not nil, is started
// with the orders (a failover) and returns what waits for it to end,
// before the reconciliation.
func pass(out io.Writer, backend paymentsim.Backend, prefix string, c config, amid func(*paymentsim.Fleet) func() error) error {
	orders, workers, salt, attemptTimeout := c.orders, c.workers, c.salt, c.attemptTimeout
	faults := paymentsim.Faults{
		Salt: salt, ResetPerMille: 50, DropPerMille: 300, DelayPerMille: 100, DelayBy: attemptTimeout + 200*time.Millisecond,
		SlowPerMille: 20, SlowBy: 800 * time.Millisecond,
	}
	// Redis calls get 10s: on a loaded machine a store error would only
	// turn into 503s and retries, but the proof is about the faults above.
	f, err := paymentsim.StartFleet(backend, prefix, faults, 10*time.Second)
	if err != nil {
		return err
	}
	defer f.Close()
	client, keys := paymentsim.NewOrderClient(attemptTimeout, workers)
	defer client.CloseIdleConnections()

	fmt.Fprintf(out, "payment service instances %s and %s behind the fault injector %s\n",
		f.Instances[0].URL, f.Instances[1].URL, f.Front.URL)
	fmt.Fprintf(out, "faults per attempt: reset before the request is read 5%%, response dropped after the charge 30%%, response held %v (attempt timeout %v) 10%%; 2%% of orders take %v at the provider\n",
		faults.DelayBy, attemptTimeout, faults.SlowBy)
	ctx := context.Background()
	wait := func() error { return nil }
	if amid != nil {
		wait = amid(f)
	}
	start := time.Now()
	results := paymentsim.PlaceOrders(ctx, client, f.Front.URL, orders, workers)
	elapsed := time.Since(start)
	if err := wait(); err != nil {
		return err
	}
	f.Front.Close() // waits for the injector's requests: every charge is in
	sum := paymentsim.Summarize(results)
	failed := orders - sum.Succeeded
	chargedFailures := 0
	for _, r := range results {
		if r.Err != nil || r.Status != http.StatusCreated {
			chargedFailures += f.Provider.Charges(r.Order)
		}
	}
	printFirstPass(out, f, sum, elapsed, chargedFailures)
	firstPass := int(f.Provider.Total())

	rec := paymentsim.Reconcile(ctx, f.Instances[0].URL, results, keys)
	fmt.Fprintf(out, "reconciliation of the %d failed orders with their keys: %d replayed (already charged), %d charged now, %d failed\n",
		failed, rec.Replayed, rec.Charged, len(rec.Failed))
	if len(rec.Failed) != 0 && backend.LockTTL > 0 {
		// Keys still locked (409): once their lock has expired, a retry
		// takes them over, and must charge only what was not charged.
		time.Sleep(backend.LockTTL + time.Second)
		again := paymentsim.Reconcile(ctx, f.Instances[0].URL, paymentsim.Only(results, rec.Failed), keys)
		fmt.Fprintf(out, "again after the lock TTL (%v), the %d orders whose key was still locked: %d replayed, %d charged now, %d failed\n",
			backend.LockTTL, len(rec.Failed), again.Replayed, again.Charged, len(again.Failed))
		rec = again
	}
	fmt.Fprintf(out, "after reconciliation: orders %d, charges %d, orders charged twice %d\n",
		orders, f.Provider.Total(), f.Provider.Doubles())

	switch {
	case f.Provider.Doubles() != 0:
		return fmt.Errorf("%d orders charged twice", f.Provider.Doubles())
	case firstPass != sum.Succeeded+chargedFailures || sum.Other != 0:
		return fmt.Errorf("first pass: charges do not match the orders confirmed and the failures charged")
	case len(rec.Failed) != 0 || int(f.Provider.Total()) != orders:
		return fmt.Errorf("after reconciliation: %d charges for %d orders", f.Provider.Total(), orders)
	}
	fmt.Fprintln(out, "OK: every order charged exactly once")
	return nil
}

func printFirstPass(out io.Writer, f *paymentsim.Fleet, sum paymentsim.Summary, elapsed time.Duration, chargedFailures int) {
	fmt.Fprintf(out, "orders %d in %v: confirmed (201) %d, failed %d\n",
		sum.Orders, elapsed.Round(time.Millisecond), sum.Succeeded, sum.Orders-sum.Succeeded)
	reasons := make([]string, 0, len(sum.Final))
	for r, n := range sum.Final {
		reasons = append(reasons, fmt.Sprintf("%s %d", r, n))
	}
	slices.Sort(reasons)
	fmt.Fprintf(out, "  failures: outcome unknown (httpretry.ErrOutcomeUnknown) %d, final httpretry errors %v, final responses by status %v, other %d\n",
		sum.Unknown, reasons, sum.Statuses, sum.Other)
	fmt.Fprintf(out, "attempts at the injector: %d passed, %d reset, %d dropped after the charge, %d held past the attempt timeout\n",
		f.Injector.Count(paymentsim.Pass), f.Injector.Count(paymentsim.Reset), f.Injector.Count(paymentsim.Drop), f.Injector.Count(paymentsim.Delay))
	fmt.Fprintf(out, "idempotency.Handler events (both instances): executed %d, replayed %d, conflict %d, fenced %d, store_error %d\n",
		f.Events.Count(idempotency.KindExecuted), f.Events.Count(idempotency.KindReplayed), f.Events.Count(idempotency.KindConflict),
		f.Events.Count(idempotency.KindFenced), f.Events.Count(idempotency.KindStoreError))
	fmt.Fprintf(out, "charges %d = confirmed %d + failed after their charge %d; orders charged twice %d\n",
		f.Provider.Total(), sum.Succeeded, chargedFailures, f.Provider.Doubles())
}
