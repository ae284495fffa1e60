package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/contrib/pgidempotency"
	"github.com/httpretry/httpretry/contrib/pgidempotency/internal/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// runConfig is the run's command line.
type runConfig struct {
	orders, duplicates, inFlight int
	lostAcks, resets             float64
	killEvery                    time.Duration
	service                      serviceConfig
}

// outcome is what the clients of one order saw.
type outcome struct {
	key    string
	body   string
	mu     sync.Mutex
	bodies map[string]int // every 2xx body a client got
}

func run(c runConfig) error {
	if c.orders <= 0 || c.duplicates <= 0 || c.inFlight <= 0 {
		return errors.New("-orders, -duplicates and -in-flight must be positive")
	}
	pg, err := pgtest.Start()
	if err != nil {
		return err
	}
	defer pg.Stop()
	ctx := context.Background()
	db, err := pg.CreateDB(ctx)
	if err != nil {
		return err
	}
	direct, err := pgxpool.New(ctx, pgtest.DSN(pg.Port, db))
	if err != nil {
		return err
	}
	defer direct.Close()
	if err := setUp(ctx, direct); err != nil {
		return err
	}
	proxy, err := pgtest.StartProxy(fmt.Sprintf("127.0.0.1:%d", pg.Port))
	if err != nil {
		return err
	}
	defer proxy.Close()
	faults := newFaults(c.service.seed)
	proxy.Commit = func() pgtest.Fate {
		if faults.percent() < c.lostAcks {
			return pgtest.LoseAnswer
		}
		return pgtest.Deliver
	}
	proxy.Reset = func() int {
		if faults.percent() < c.resets {
			return 1 + int(faults.percent()/2) // at one of its first 50 statements
		}
		return 0
	}
	svc := c.service
	// Connections live a second, so that resets meet many of them.
	svc.dsn = pgtest.DSN(proxy.Port, db) + "&pool_max_conn_lifetime=1s"
	fleet, err := startFleet(svc, 2)
	if err != nil {
		return err
	}
	defer fleet.stop()
	stopKiller := fleet.killRandomly(c.killEvery, faults)

	orders := place(c, fleet)
	stopKiller()
	if err := reconcile(orders, fleet); err != nil {
		return err
	}
	return report(ctx, c, direct, orders, fleet, proxy)
}

// setUp creates the store's table and the business table. charges has no
// unique constraint on the order: a second charge of one order would be a
// second row, for the count to find.
func setUp(ctx context.Context, pool *pgxpool.Pool) error {
	s, err := pgidempotency.New(pool, pgidempotency.Options{})
	if err != nil {
		return err
	}
	if err := s.Migrate(ctx); err != nil {
		return err
	}
	_, err = pool.Exec(ctx, `CREATE TABLE charges (id bigserial PRIMARY KEY, order_id text NOT NULL, amount integer NOT NULL)`)
	return err
}

// faults draws the run's random faults.
type faults struct {
	mu  sync.Mutex
	rng *rand.Rand
}

func newFaults(seed uint64) *faults {
	return &faults{rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))}
}

func (f *faults) percent() float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rng.Float64() * 100
}

func (f *faults) intn(n int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rng.IntN(n)
}

// place sends every order: duplicates concurrent keyed POSTs each,
// inFlight orders at a time, through httpretry to a random instance per
// attempt.
func place(c runConfig, fleet *fleet) []*outcome {
	client := &http.Client{Transport: &httpretry.Transport{
		Base:           fleet,
		MaxAttempts:    30,
		Timeout:        60 * time.Second,
		AttemptTimeout: 10 * time.Second,
	}}
	orders := make([]*outcome, c.orders)
	sem := make(chan struct{}, c.inFlight)
	var wg sync.WaitGroup
	for i := range orders {
		o := &outcome{key: newKey(), body: fmt.Sprintf(`{"order":"o-%d","amount":%d}`, i, 100+i%900), bodies: map[string]int{}}
		orders[i] = o
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			var dups sync.WaitGroup
			for range c.duplicates {
				dups.Go(func() { o.send(client) })
			}
			dups.Wait()
		})
	}
	wg.Wait()
	return orders
}

func newKey() string {
	b := make([]byte, 16)
	_, _ = crand.Read(b)
	return hex.EncodeToString(b)
}

// send posts the order once (with the Transport's retries) and keeps a
// 2xx body.
func (o *outcome) send(client *http.Client) (int, error) {
	req, err := http.NewRequest(http.MethodPost, "http://payments/charges", strings.NewReader(o.body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Idempotency-Key", o.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode/100 == 2 {
		o.mu.Lock()
		o.bodies[string(b)]++
		o.mu.Unlock()
	}
	return resp.StatusCode, nil
}

func (o *outcome) confirmed() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.bodies) > 0
}

// reconcile sends every order no client saw confirmed again with its key,
// until it is: its first charge is replayed, or it runs now.
func reconcile(orders []*outcome, fleet *fleet) error {
	client := &http.Client{Transport: &httpretry.Transport{Base: fleet, MaxAttempts: 100, Timeout: 2 * time.Minute}}
	for _, o := range orders {
		for try := 0; !o.confirmed(); try++ {
			if try == 10 {
				return fmt.Errorf("order with key %s: never confirmed", o.key)
			}
			_, _ = o.send(client)
		}
	}
	return nil
}

// report replays every order's key, counts the charges per order, and
// prints the summary line.
func report(ctx context.Context, c runConfig, direct *pgxpool.Pool, orders []*outcome, fleet *fleet, proxy *pgtest.Proxy) error {
	charges := map[string]int{}
	rows, err := direct.Query(ctx, "SELECT order_id, count(*) FROM charges GROUP BY order_id")
	if err != nil {
		return err
	}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return err
		}
		charges[id] = n
	}
	if err := rows.Err(); err != nil {
		return err
	}
	client := &http.Client{Transport: &httpretry.Transport{Base: fleet, MaxAttempts: 100, Timeout: 2 * time.Minute}}
	once, twice, lost := 0, 0, 0
	for i, o := range orders {
		switch n := charges[fmt.Sprintf("o-%d", i)]; {
		case n == 1:
			once++
		case n > 1:
			twice++
		}
		if !o.replaysEvery2xx(client) {
			lost++
		}
	}
	firsts, stmts := fleet.statements()
	perFirst := 0.0
	if firsts > 0 {
		perFirst = float64(stmts) / float64(firsts)
	}
	fmt.Printf("payments-pg: %d orders, %d charged exactly once, %d charged twice, %d lost responses, %d crashes, %d lost commit acks, %.2f SQL statements per first request\n",
		len(orders), once, twice, lost, fleet.crashes.Load(), proxy.LostAnswers.Load(), perFirst)
	if once != len(orders) || twice != 0 || lost != 0 {
		return errors.New("an order was not charged exactly once, or a response was lost")
	}
	return nil
}

// replaysEvery2xx replays the order's key once more and reports whether
// every 2xx any client got for it is that replay, byte for byte.
func (o *outcome) replaysEvery2xx(client *http.Client) bool {
	o.mu.Lock()
	seen := make([]string, 0, len(o.bodies))
	for b := range o.bodies {
		seen = append(seen, b)
	}
	o.mu.Unlock()
	req, _ := http.NewRequest(http.MethodPost, "http://payments/charges", strings.NewReader(o.body))
	req.Header.Set("Idempotency-Key", o.key)
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode/100 != 2 || resp.Header.Get("Idempotent-Replayed") != "true" {
		return false
	}
	for _, s := range seen {
		if !bytes.Equal([]byte(s), b) {
			return false
		}
	}
	return true
}
