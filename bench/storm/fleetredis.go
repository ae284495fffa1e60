package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
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
	otherRTs     atomic.Int64 // the rest: flushes, probes, connection setup, Cluster layout
	stateChanges atomic.Int64 // reported by OnStateChange

	mu      sync.Mutex      // protects the fields below
	added   []time.Duration // per failed operation, the time spent in Withdraw
	sent    []time.Time     // when each command was sent
	granted []*atomic.Int64 // per process, the retries its budget granted
}

// redisPolicy returns the policy of P processes that each have their own
// Transport, Redis client and redisretry.NewBudget(rdb, key, 20, 0.1), all
// on one key of target; st gathers their measurements. callTimeout is the
// budget's CallTimeout: 0 for the default. Each process's FleetSize is the
// fleet's size, processes, as a deployment would set it: should Redis
// fail, the local buckets add up to one capacity, and a lease is about
// the bucket's share per process.
func redisPolicy(target *redisTarget, key string, processes int, st *redisStats, callTimeout time.Duration) policy {
	where, client := "one redis-server", "redis.NewClient"
	if target.name == "cluster" {
		where, client = "a Redis Cluster of three masters", "redis.NewClusterClient"
	}
	return policy{
		key: redisPolicyKey, name: "httpretry + redisretry", ours: true,
		desc: "httpretry defaults with Budget: redisretry.NewBudget(rdb, key, 20, 0.1, redisretry.Options{FleetSize: P}), one key for the whole fleet on " +
			where + ", each process its own " + client + " (pool of 4)",
		new: func() (*http.Client, func()) {
			base := cleanhttp.DefaultPooledTransport()
			rdb := target.connect(countingHook{st})
			b, err := redisretry.NewBudget(rdb, key, 20, 0.1, redisretry.Options{
				FleetSize:     processes,
				CallTimeout:   callTimeout,
				OnStateChange: func(redisretry.State) { st.stateChanges.Add(1) },
			})
			if err != nil {
				panic(err) // a non-nil client and a constant key: cannot happen
			}
			t := &httpretry.Transport{Base: base, Budget: &timedBudget{b: b, st: st, granted: st.process()}}
			return &http.Client{Transport: &addedLatency{next: t, st: st}}, func() {
				base.CloseIdleConnections()
				b.Close()
				rdb.Close()
			}
		},
	}
}

// process returns the grant counter of a new process.
func (st *redisStats) process() *atomic.Int64 {
	n := new(atomic.Int64)
	st.mu.Lock()
	st.granted = append(st.granted, n)
	st.mu.Unlock()
	return n
}

// withdrawing marks the context of a Withdraw, so that the hook can tell
// its round trips from the background flushes.
type withdrawing struct{}

// spent carries the operation's time in Withdraw, in nanoseconds.
type spent struct{}

// timedBudget counts and times the Withdraw calls of a redisretry Budget.
type timedBudget struct {
	b       *redisretry.Budget
	st      *redisStats
	granted *atomic.Int64
}

func (t *timedBudget) Deposit() { t.b.Deposit() }
func (t *timedBudget) Refund()  { t.b.Refund() }

func (t *timedBudget) Withdraw(ctx context.Context) bool {
	t.st.withdrawals.Add(1)
	start := time.Now()
	ok := t.b.Withdraw(context.WithValue(ctx, withdrawing{}, true))
	if ok {
		t.granted.Add(1)
	}
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

// countingHook counts every command a client sends, a pipeline's one by
// one, and when it was sent.
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
		h.st.record(1)
		return next(ctx, cmd)
	}
}

func (h countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.st.otherRTs.Add(int64(len(cmds)))
		h.st.record(len(cmds))
		return next(ctx, cmds)
	}
}

// record notes n commands sent now.
func (st *redisStats) record(n int) {
	now := time.Now()
	st.mu.Lock()
	for range n {
		st.sent = append(st.sent, now)
	}
	st.mu.Unlock()
}

// redisSummary is what a table shows of a redisStats.
type redisSummary struct {
	withdrawals, withdrawRTs, otherRTs, stateChanges int64
	outageCommands                                   int64   // commands sent while the outage lasted
	perFailing                                       float64 // outageCommands per operation failed in the outage
	added                                            quantiles
	fair                                             fairness
}

// fairness is how the retries the budget granted landed on the
// processes: the fewest, the median and the most one process got, and
// the mean.
type fairness struct {
	min, median, max int64
	mean             float64
}

// spread returns the fairness of per-process grant counts.
func spread(counts []int64) fairness {
	if len(counts) == 0 {
		return fairness{}
	}
	s := slices.Sorted(slices.Values(counts))
	var sum int64
	for _, c := range s {
		sum += c
	}
	return fairness{min: s[0], median: s[len(s)/2], max: s[len(s)-1], mean: float64(sum) / float64(len(s))}
}

// summary sums up st for r, the run it measured: the outage is r's second
// phase, timed from r's start.
func (st *redisStats) summary(r *run) redisSummary {
	st.mu.Lock()
	added := append([]time.Duration(nil), st.added...)
	from := r.start.Add(r.phases[0].dur)
	to := from.Add(r.phases[min(1, len(r.phases)-1)].dur)
	var inOutage int64
	for _, at := range st.sent {
		if !at.Before(from) && at.Before(to) {
			inOutage++
		}
	}
	counts := make([]int64, len(st.granted))
	for i, g := range st.granted {
		counts[i] = g.Load()
	}
	st.mu.Unlock()
	s := redisSummary{
		withdrawals:    st.withdrawals.Load(),
		withdrawRTs:    st.withdrawRTs.Load(),
		otherRTs:       st.otherRTs.Load(),
		stateChanges:   st.stateChanges.Load(),
		outageCommands: inOutage,
		added:          summarise(added),
		fair:           spread(counts),
	}
	if failed := r.phaseStats()[min(1, len(r.phases)-1)].failed; failed > 0 {
		s.perFailing = float64(inOutage) / float64(failed)
	}
	return s
}

// redisLine is the line make storm prints for one redis fleet run.
func redisLine(r *run) string {
	st := r.phaseStats()
	f := st[min(1, len(st)-1)] // the outage phase
	s := r.redis.summary(r)
	name := "fleet-redis"
	if r.redisOn != "" {
		name += "-" + r.redisOn
	}
	return fmt.Sprintf("%s: P=%d amplification %.2fx, %.2f Redis commands per failing operation", name, r.processes, f.amp, s.perFailing)
}

// fairnessLine is the line make storm prints of how one redis fleet
// run's retries landed on its processes.
func fairnessLine(r *run) string {
	f := r.redis.summary(r).fair
	name := "fleet-redis"
	if r.redisOn != "" {
		name += "-" + r.redisOn
	}
	return fmt.Sprintf("%s fairness: P=%d retries granted per process min %d, median %d, max %d (mean %.2f)",
		name, r.processes, f.min, f.median, f.max, f.mean)
}
