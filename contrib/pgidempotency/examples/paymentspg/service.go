package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/httpretry/httpretry/contrib/pgidempotency"
	"github.com/httpretry/httpretry/idempotency"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The payment service: one instance per process, started by the run
// (serve), which kills it at random points and starts it again.

// serviceConfig is what the run tells an instance, on its command line.
type serviceConfig struct {
	dsn      string
	addr     string
	killPct  float64 // percent of commits after which, or before which, it kills itself
	stallPct float64 // percent of runs that stall past their lock
	lockTTL  time.Duration
	seed     uint64
}

// stmtCount counts the store's statements of one request.
type stmtCount struct{ n atomic.Int64 }

type stmtKey struct{}

// storeTracer counts, per request, the statements on the store's table:
// the store's own, beside the handler's.
type storeTracer struct{}

func (storeTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if c, ok := ctx.Value(stmtKey{}).(*stmtCount); ok && strings.Contains(d.SQL, pgidempotency.DefaultTable) {
		c.n.Add(1)
	}
	return ctx
}

func (storeTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// killingStore kills its own process (SIGKILL) around some commits.
type killingStore struct {
	*pgidempotency.Store
	pct float64
	rng func() float64
}

func (s *killingStore) CommitTx(ctx context.Context, tx pgx.Tx) error {
	if s.rng() < s.pct/200 {
		kill("before")
	}
	err := s.Store.CommitTx(ctx, tx)
	if s.rng() < s.pct/200 {
		kill("after")
	}
	return err
}

// kill ends this process at once, as SIGKILL does: no deferred call, no
// response sent.
func kill(where string) {
	fmt.Printf("KILL %s\n", where)
	p, _ := os.FindProcess(os.Getpid())
	_ = p.Kill()
	select {}
}

// serve runs one instance until killed.
func serve(c serviceConfig) error {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(c.dsn)
	if err != nil {
		return err
	}
	cfg.MaxConns = 24
	cfg.ConnConfig.Tracer = storeTracer{}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	store, err := pgidempotency.New(pool, pgidempotency.Options{})
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(c.seed, uint64(os.Getpid())))
	var mu chanMutex = make(chan struct{}, 1)
	draw := func() float64 { mu <- struct{}{}; defer func() { <-mu }(); return rng.Float64() * 100 }
	ks := &killingStore{Store: store, pct: c.killPct, rng: draw}
	var firsts, firstStmts, replays, replayStmts atomic.Int64
	charge := idempotency.TxHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chargeOrder(w, r, draw() < c.stallPct, c.lockTTL)
	}), ks, idempotency.Options{RequireKey: true, LockTTL: c.lockTTL})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cnt := &stmtCount{}
		sw := &statusWriter{ResponseWriter: w}
		charge.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), stmtKey{}, cnt)))
		switch {
		case sw.status == http.StatusCreated && w.Header().Get(idempotency.ReplayedHeader) == "true":
			replays.Add(1)
			replayStmts.Add(cnt.n.Load())
		case sw.status == http.StatusCreated:
			firsts.Add(1)
			firstStmts.Add(cnt.n.Load())
		}
	})
	go func() {
		for range time.Tick(200 * time.Millisecond) {
			fmt.Printf("STATS %d %d %d %d\n", firsts.Load(), firstStmts.Load(), replays.Load(), replayStmts.Load())
		}
	}()
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return err
	}
	fmt.Println("LISTEN")
	return http.Serve(ln, h)
}

type chanMutex chan struct{}

// statusWriter remembers the status written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// orderRequest is a charge's body.
type orderRequest struct {
	Order  string `json:"order"`
	Amount int    `json:"amount"`
}

// chargeOrder charges an order: a row in charges through the TxHandler's
// transaction, answered with the charge's id. A stalled run sleeps past
// its lock first, so that a duplicate takes its key over and it is
// fenced.
func chargeOrder(w http.ResponseWriter, r *http.Request, stall bool, lockTTL time.Duration) {
	tx, ok := idempotency.TxFrom[pgx.Tx](r.Context())
	if !ok {
		http.Error(w, "no transaction", http.StatusInternalServerError)
		return
	}
	var o orderRequest
	if err := json.NewDecoder(r.Body).Decode(&o); err != nil || o.Order == "" {
		http.Error(w, "bad order", http.StatusBadRequest)
		return
	}
	var id int64
	err := tx.QueryRow(r.Context(), "INSERT INTO charges (order_id, amount) VALUES ($1, $2) RETURNING id", o.Order, o.Amount).Scan(&id)
	if err != nil {
		w.Header().Set("Retry-After", "0")
		http.Error(w, "database unavailable", http.StatusServiceUnavailable)
		return
	}
	if stall {
		time.Sleep(lockTTL + lockTTL/2)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"order":%q,"charge":%d,"amount":%d}`, o.Order, id, o.Amount)
}
