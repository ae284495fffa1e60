// Command paymentspg is the exactly-once proof on PostgreSQL: it starts
// its own PostgreSQL server (initdb on a free loopback port), two
// instances of a payment service (this program again, with -serve) whose
// charge endpoint is an idempotency.TxHandler over one
// pgidempotency.Store, its business table and the idempotency records in
// one database, and a proxy between the instances and PostgreSQL that
// loses COMMIT acknowledgements and resets connections. Clients send each
// order as keyed POSTs through httpretry, ten concurrent duplicates per
// key, while instances kill themselves (SIGKILL) just before or just
// after a COMMIT, the run kills them at random moments too, and some
// handler runs stall past their lock so that a duplicate takes their key
// over. Orders no client saw confirmed are then sent again with their
// key until they are; then every order's key is replayed and compared
// with every 2xx any client got, and the charges are counted per order.
//
// It prints one line,
//
//	payments-pg: N orders, N charged exactly once, 0 charged twice, 0 lost responses, K crashes, L lost commit acks, S SQL statements per first request
//
// and exits 1 unless every order was charged exactly once and no
// response was lost. A lost response is a 2xx a client got whose replay
// differs, or is missing.
//
//	make demo-payments-pg
//	cd contrib/pgidempotency && go run ./examples/paymentspg -orders 20000
//
// Everything listens on 127.0.0.1 and stops when the program ends.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	var c runConfig
	var s serviceConfig
	flag.IntVar(&c.orders, "orders", 20000, "orders to place")
	flag.IntVar(&c.duplicates, "duplicates", 10, "concurrent requests per order, one key")
	flag.IntVar(&c.inFlight, "in-flight", 128, "orders in flight at once")
	flag.Float64Var(&c.lostAcks, "lost-acks", 5, "percent of COMMIT acknowledgements lost (after PostgreSQL committed)")
	flag.Float64Var(&c.resets, "resets", 1, "percent of database connections reset at a random statement")
	flag.Float64Var(&s.killPct, "kills", 0.5, "percent of commits just before or after which an instance kills itself")
	flag.Float64Var(&s.stallPct, "stalls", 0.2, "percent of handler runs that stall past their lock")
	flag.DurationVar(&s.lockTTL, "lock", time.Second, "the lock of a key while its handler runs")
	flag.DurationVar(&c.killEvery, "kill-every", 3*time.Second, "the run kills a random instance this often, at a random moment")
	serveMode := flag.Bool("serve", false, "run one instance of the payment service (started by the run)")
	flag.StringVar(&s.dsn, "dsn", "", "with -serve: the database")
	flag.StringVar(&s.addr, "addr", "", "with -serve: the address to listen on")
	flag.Uint64Var(&s.seed, "seed", 1, "the starting value of the random faults' draws")
	flag.Parse()
	var err error
	if *serveMode {
		err = serve(s)
	} else {
		c.service = s
		err = run(c)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "paymentspg:", err)
		os.Exit(1)
	}
}
