package pgidempotency

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/httpretry/httpretry/idempotency"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// statementLog records the SQL of every statement a pool runs.
type statementLog struct {
	mu  sync.Mutex
	sql []string
}

func (l *statementLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sql = append(l.sql, d.SQL)
	return ctx
}

func (l *statementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// take returns and forgets the statements so far: those on the store's
// table, and the others.
func (l *statementLog) take() (store, other int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.sql {
		if strings.Contains(s, DefaultTable) {
			store++
		} else {
			other++
		}
	}
	l.sql = nil
	return store, other
}

// TestTxStatementsPerRequest: a first request costs the store two
// statements beside the handler's own (Reserve, CompleteTx; BEGIN and
// COMMIT are the transaction's), and a replay one (Reserve).
func TestTxStatementsPerRequest(t *testing.T) {
	log := &statementLog{}
	f := newFixture(t, Options{}, false, func(c *pgxpool.Config) { c.ConnConfig.Tracer = log })
	srv := f.serve(chargeHandler, idempotency.Options{})
	log.take()
	if a := post(t, srv.URL, "k-stmts", order{ID: "o-stmts", Amount: 1}); a.status != http.StatusCreated {
		t.Fatalf("first: %d", a.status)
	}
	store, other := log.take()
	if store != 2 || other != 3 { // begin, the handler's INSERT, commit
		t.Fatalf("first request: %d store statements and %d others, want 2 and 3", store, other)
	}
	if a := post(t, srv.URL, "k-stmts", order{ID: "o-stmts", Amount: 1}); a.header.Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("second: not a replay: %v", a.header)
	}
	if store, other := log.take(); store != 1 || other != 0 {
		t.Fatalf("replay: %d store statements and %d others, want 1 and 0", store, other)
	}
}
