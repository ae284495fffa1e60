package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/contrib/redisretry"
	"github.com/redis/go-redis/v9"
)

// redisPolicyKey is the key of the fleet policy whose processes share one
// budget in Redis.
const redisPolicyKey = "httpretry-redis"

// redisStats is what the processes of one httpretry + redisretry run
// measured of their budget.
type redisStats struct {
	withdrawals  atomic.Int64 // Withdraw calls
	withdrawRTs  atomic.Int64 // scripts sent by Withdraw
	otherRTs     atomic.Int64 // the rest: flushes, probes, connection setup
	stateChanges atomic.Int64 // reported by OnStateChange

	mu    sync.Mutex      // protects added
	added []time.Duration // per failed operation, the time spent in Withdraw
}

// redisPolicy returns the policy of P processes that each have their own
// Transport, Redis client and redisretry.NewBudget(rdb, key, 20, 0.1), all
// on one key of the server at addr; st gathers their measurements.
// callTimeout is the budget's CallTimeout: 0 for the default. Each
// process's FleetSize is the fleet's size, processes, as a deployment
// would set it: should Redis fail, the local buckets add up to one
// capacity.
func redisPolicy(addr, key string, processes int, st *redisStats, callTimeout time.Duration) policy {
	return policy{
		key: redisPolicyKey, name: "httpretry + redisretry", ours: true,
		desc: "httpretry defaults with Budget: redisretry.NewBudget(rdb, key, 20, 0.1, redisretry.Options{FleetSize: P}), one key for the whole fleet, each process its own Redis client (pool of 4)",
		new: func() (*http.Client, func()) {
			base := cleanhttp.DefaultPooledTransport()
			rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 4, ContextTimeoutEnabled: true})
			rdb.AddHook(countingHook{st})
			b, err := redisretry.NewBudget(rdb, key, 20, 0.1, redisretry.Options{
				FleetSize:     processes,
				CallTimeout:   callTimeout,
				OnStateChange: func(redisretry.State) { st.stateChanges.Add(1) },
			})
			if err != nil {
				panic(err) // a non-nil client and a constant key: cannot happen
			}
			t := &httpretry.Transport{Base: base, Budget: &timedBudget{b: b, st: st}}
			return &http.Client{Transport: &addedLatency{next: t, st: st}}, func() {
				base.CloseIdleConnections()
				b.Close()
				rdb.Close()
			}
		},
	}
}

// withdrawing marks the context of a Withdraw, so that the hook can tell
// its round trips from the background flushes.
type withdrawing struct{}

// spent carries the operation's time in Withdraw, in nanoseconds.
type spent struct{}

// timedBudget counts and times the Withdraw calls of a redisretry Budget.
type timedBudget struct {
	b  *redisretry.Budget
	st *redisStats
}

func (t *timedBudget) Deposit() { t.b.Deposit() }
func (t *timedBudget) Refund()  { t.b.Refund() }

func (t *timedBudget) Withdraw(ctx context.Context) bool {
	t.st.withdrawals.Add(1)
	start := time.Now()
	ok := t.b.Withdraw(context.WithValue(ctx, withdrawing{}, true))
	if acc, _ := ctx.Value(spent{}).(*atomic.Int64); acc != nil {
		acc.Add(int64(time.Since(start)))
	}
	return ok
}

// addedLatency gives each operation an accumulator of its time in
// Withdraw and records it for the operations that fail.
type addedLatency struct {
	next http.RoundTripper
	st   *redisStats
}

func (a *addedLatency) RoundTrip(req *http.Request) (*http.Response, error) {
	acc := new(atomic.Int64)
	resp, err := a.next.RoundTrip(req.WithContext(context.WithValue(req.Context(), spent{}, acc)))
	if err != nil || resp.StatusCode != http.StatusOK {
		a.st.mu.Lock()
		a.st.added = append(a.st.added, time.Duration(acc.Load()))
		a.st.mu.Unlock()
	}
	return resp, err
}

// countingHook counts the commands a client sends: each is one round
// trip, as redisretry sends no pipelines.
type countingHook struct{ st *redisStats }

func (countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		// Connection setup (HELLO, CLIENT SETINFO) on a connection
		// dialed during a Withdraw counts with the other round trips.
		if name := cmd.Name(); ctx.Value(withdrawing{}) != nil && (name == "evalsha" || name == "eval") {
			h.st.withdrawRTs.Add(1)
		} else {
			h.st.otherRTs.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.st.otherRTs.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// redisSummary is what a table shows of a redisStats.
type redisSummary struct {
	withdrawals, withdrawRTs, otherRTs, stateChanges int64
	perRetry                                         float64 // Withdraw round trips per Withdraw
	added                                            quantiles
}

func (st *redisStats) summary() redisSummary {
	st.mu.Lock()
	added := append([]time.Duration(nil), st.added...)
	st.mu.Unlock()
	s := redisSummary{
		withdrawals:  st.withdrawals.Load(),
		withdrawRTs:  st.withdrawRTs.Load(),
		otherRTs:     st.otherRTs.Load(),
		stateChanges: st.stateChanges.Load(),
		added:        summarise(added),
	}
	if s.withdrawals > 0 {
		s.perRetry = float64(s.withdrawRTs) / float64(s.withdrawals)
	}
	return s
}

// redisLine is the line make storm prints for one redis fleet run.
func redisLine(r *run) string {
	st := r.phaseStats()
	f := st[min(1, len(st)-1)] // the outage phase
	s := r.redis.summary()
	return fmt.Sprintf("fleet-redis: P=%d amplification %.2fx, %.2f Redis round trips per retry, failing operation +%s p50 +%s p99 in the budget",
		r.processes, f.amp, s.perRetry, ms(s.added.p50), ms(s.added.p99))
}
