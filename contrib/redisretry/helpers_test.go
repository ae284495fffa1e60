package redisretry

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/httpretry/httpretry/internal/leakcheck"
)

func TestMain(m *testing.M) {
	// go-redis logs every failed dial; the fault drills make many.
	redis.SetLogger(quiet{})
	leakcheck.Main(m)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// syncBuffer is a bytes.Buffer safe for a logger on another goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// patient is the CallTimeout of the tests whose verdict is not about
// time: no loaded machine keeps Redis from answering within it, so they
// never fall back by accident.
const patient = time.Minute

// newBudget returns a Budget closed when t ends.
func newBudget(t *testing.T, rdb redis.UniversalClient, key string, capacity, perRequest float64, o Options) *Budget {
	t.Helper()
	b, err := NewBudget(rdb, key, capacity, perRequest, o)
	if err != nil {
		t.Fatalf("NewBudget: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// perCall returns o with neither leases nor remembered refusals: a
// Budget that asks Redis on every Withdraw, whose calls a test examines
// one by one.
func perCall(o Options) Options {
	o.MaxLease, o.RefusalMemory = -1, -1
	return o
}

// drain withdraws until b refuses and returns how many it granted.
func drain(t *testing.T, b *Budget) int {
	t.Helper()
	n := 0
	for b.Withdraw(context.Background()) {
		n++
		if n > 1_000_000 {
			t.Fatal("budget never ran out")
		}
	}
	return n
}

// tokens reads b's shared bucket or fails t.
func tokens(t *testing.T, b *Budget) float64 {
	t.Helper()
	v, err := b.Tokens(context.Background())
	if err != nil {
		t.Fatalf("Tokens: %v", err)
	}
	return v
}

// eventually polls cond every 5ms until it holds, failing t after 20s: a
// bound for things that happen on background goroutines, generous enough
// for any machine.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// counter is a go-redis hook that counts the commands sent: each is one
// round trip, as this package sends no pipelines.
type counter struct{ n atomic.Int64 }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// stateLog records the reported state changes.
type stateLog struct {
	mu  sync.Mutex
	got []State
}

func (l *stateLog) add(s State) {
	l.mu.Lock()
	l.got = append(l.got, s)
	l.mu.Unlock()
}

func (l *stateLog) states() []State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]State(nil), l.got...)
}

// server starts a redis-server for t and returns a client of it.
func server(t testing.TB) (*redistest.Server, *redis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	return srv, srv.Client(t)
}
