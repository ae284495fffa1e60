package redisretry

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/redis/go-redis/v9"
)

// gate is a go-redis hook that holds the first script call asking for
// tokens (a Withdraw's) at a point the test chooses: before it is sent
// (after false) or after its reply arrived (after true).
type gate struct {
	after   bool
	once    sync.Once
	reached chan struct{} // closed when the call is held
	release chan struct{} // closed by the test to let it go on
}

func newGate(after bool) *gate {
	return &gate{after: after, reached: make(chan struct{}), release: make(chan struct{})}
}

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !takesTokens(cmd) {
			return next(ctx, cmd)
		}
		held := false
		g.once.Do(func() { held = true })
		if !held {
			return next(ctx, cmd)
		}
		var err error
		if g.after {
			// The script ran on the server; the reply is in hand.
			err = next(context.WithoutCancel(ctx), cmd)
		}
		close(g.reached)
		<-g.release
		if !g.after {
			err = next(context.WithoutCancel(ctx), cmd)
		}
		return err
	}
}

// takesTokens reports whether cmd is a run of bucketScript that asks for
// tokens (ARGV[3] > 0).
func takesTokens(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 3 || (cmd.Name() != "evalsha" && cmd.Name() != "eval") {
		return false
	}
	// evalsha, sha, numkeys, the keys, then ARGV[1], ARGV[2], ARGV[3].
	numKeys, err := strconv.Atoi(fmt.Sprint(args[2]))
	i := 3 + numKeys + 2
	if err != nil || len(args) <= i {
		return false
	}
	return fmt.Sprint(args[i]) != "0"
}

// units reads the bucket's count straight from Redis, in tokens: what the
// fleet has left, whatever any Budget believes.
func rawTokens(t *testing.T, rdb redis.UniversalClient, key string, capacity float64) float64 {
	t.Helper()
	v, err := rdb.Get(context.Background(), key).Result()
	if err == redis.Nil {
		return capacity
	}
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("GET %s = %q: %v", key, v, err)
	}
	return float64(n) / tokenUnit
}

// Expected: Close returns the lease of a Withdraw whose reply arrives while Close runs; only the token spent leaves the bucket.
func TestCloseReturnsTheLeaseOfAWithdrawInFlight(t *testing.T) {
	t.Parallel()
	srv, rdb := server(t)
	if err := bucketScript.Load(context.Background(), rdb).Err(); err != nil {
		t.Fatal(err)
	}
	g := newGate(false)
	rdb.AddHook(g)
	b, err := NewBudget(rdb, "close-lease", 20, 0, Options{FleetSize: 1, FlushInterval: time.Hour, CallTimeout: patient})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	granted := make(chan bool, 1)
	go func() { granted <- b.Withdraw(context.Background()) }()
	<-g.reached
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	eventually(t, "Close has sent what it holds", func() bool { return b.state.Load() == stateClosed })
	close(g.release)
	if !<-granted {
		t.Fatal("the Withdraw was refused by a full bucket")
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := rawTokens(t, srv.Client(t), "close-lease", 20); got != 19 {
		t.Errorf("after one retry and Close the shared bucket holds %v tokens; want 19 (the lease's other tokens are lost)", got)
	}
}

// Expected: a Withdraw canceled while its script runs reports false and the tokens the script took come back to the shared bucket.
func TestWithdrawCanceledMidCallTakesNoTokens(t *testing.T) {
	t.Parallel()
	srv, rdb := server(t)
	if err := bucketScript.Load(context.Background(), rdb).Err(); err != nil {
		t.Fatal(err)
	}
	g := newGate(true)
	rdb.AddHook(g)
	b := newBudget(t, rdb, "cancel-lease", 20, 0, Options{FleetSize: 1, FlushInterval: time.Hour, CallTimeout: patient})
	ctx, cancel := context.WithCancel(context.Background())
	granted := make(chan bool, 1)
	go func() { granted <- b.Withdraw(ctx) }()
	<-g.reached
	cancel()
	got := <-granted
	close(g.release)
	eventually(t, "the call ended", func() bool { return b.inflight.Load() == 0 })
	if err := b.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	left := rawTokens(t, srv.Client(t), "cancel-lease", 20)
	if got {
		left++ // the caller got its retry: one token spent
	}
	if left != 20 {
		t.Errorf("after a Withdraw canceled mid-call (granted %v) and a flush, the shared bucket holds the equivalent of %v tokens; want 20", got, left)
	}
}

var (
	_ redis.Hook = (*gate)(nil)
	_            = net.Dial
	_            = atomic.Int64{}
	_            = redistest.Start
)

// Expected: leased tokens carried by a flush that never reached Redis go back to the bucket once Redis answers again.
func TestLeasedTokensSurviveAFlushThatNeverReachedRedis(t *testing.T) {
	t.Parallel()
	srv, _ := server(t)
	p := redistest.StartProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	if err := bucketScript.Load(context.Background(), rdb).Err(); err != nil {
		t.Fatal(err)
	}
	b := newBudget(t, rdb, "drop-lease", 20, 0, Options{FleetSize: 1, FlushInterval: time.Hour, CallTimeout: patient})
	if !b.Withdraw(context.Background()) {
		t.Fatal("refused by a full bucket")
	}
	p.DropNext("evalsha", 1+rdb.Options().MaxRetries)
	if err := b.Flush(context.Background()); err == nil {
		t.Fatal("a flush whose every attempt was dropped succeeded")
	}
	// The prober sends the flush held back again: at once, as no call
	// is in flight once the dropped one has answered.
	if !b.probe() {
		t.Fatal("the probe after the drops failed")
	}
	if err := b.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := rawTokens(t, srv.Client(t), "drop-lease", 20); got != 19 {
		t.Errorf("after one retry and a flush dropped on the way, the shared bucket holds %v tokens; want 19", got)
	}
}
