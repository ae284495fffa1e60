package pgidempotency

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/pgidempotency/internal/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"
)

// server is the PostgreSQL server every test of this binary shares; each
// test gets a database of its own (newDB).
var (
	server    *pgtest.Server
	serverErr error
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(serveChild())
	}
	server, serverErr = pgtest.Start()
	code := m.Run()
	if server != nil {
		server.Stop()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// needServer skips the test when PostgreSQL is not installed, and fails it
// under CI.
func needServer(t testing.TB) *pgtest.Server {
	t.Helper()
	if serverErr != nil {
		if pgtest.Required() {
			t.Fatalf("pgidempotency: %v", serverErr)
		}
		t.Skipf("pgidempotency: %v", serverErr)
	}
	return server
}

// newDB creates a database of its own for the test and returns its name.
func newDB(t testing.TB) string {
	t.Helper()
	s := needServer(t)
	name, err := s.CreateDB(context.Background())
	if err != nil {
		t.Fatalf("create database: %v", err)
	}
	return name
}

// newPool returns a pool on database db through port, closed at the end
// of the test.
func newPool(t testing.TB, port int, db string, configure ...func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(port, db))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 16
	for _, f := range configure {
		f(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// newStore returns a migrated Store on a database of its own, and its
// pool.
func newStore(t testing.TB, opts Options) (*Store, *pgxpool.Pool) {
	t.Helper()
	db := newDB(t)
	pool := newPool(t, server.Port, db)
	return migratedStore(t, pool, opts), pool
}

func migratedStore(t testing.TB, pool *pgxpool.Pool, opts Options) *Store {
	t.Helper()
	s, err := New(pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}
