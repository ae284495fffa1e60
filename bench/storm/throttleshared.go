package main

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/contrib/redisretry"
	"github.com/httpretry/httpretry/throttle"
	"github.com/redis/go-redis/v9"
)

// The shared-state fleet: the outage over sharedProcesses processes that
// each call sharedRate times a second, every process a Transport with a
// throttle of its own whose counts are shared through one redis-server
// (contrib/redisretry's ThrottleState, each process on a client of its
// own). The processes are simulated in this one program: a thousand
// Throttles, ThrottleStates and Redis clients, each with its own
// connections and its own subscription. Beside it, on the same arrivals:
// a single attempt (the reference for recovery) and the throttle without
// shared state.
const (
	sharedProcesses = 1000
	sharedRate      = 1.0 // operations per second of each process
	keyShared       = "httpretry-throttle-shared"
	// maxRedisPerOp is the target for the Redis commands per operation.
	maxRedisPerOp = 0.1
)

// sharedRun is the shared-state fleet's runs.
type sharedRun struct {
	shared, alone, single *trun
	commands              map[string]int64 // by command, over the shared run, from INFO commandstats
	ops                   int
	err                   error
}

// total returns the Redis commands of the run.
func (s *sharedRun) total() int64 {
	var n int64
	for _, v := range s.commands {
		n += v
	}
	return n
}

// runSharedFleet runs the shared-state fleet on a redis-server of its own.
func runSharedFleet(ctx context.Context, c tconfig, progress func(string, ...any)) *sharedRun {
	ph := c.outageSchedule()
	rate := sharedRate * sharedProcesses
	arr := arrivals(c.seed, rate, ph)
	capacity := max(1, int(float64(c.capacity)*rate/c.rate))
	out := &sharedRun{ops: len(arr)}
	rt, err := startRedis()
	if err != nil {
		out.err = err
		return out
	}
	defer rt.close()
	for _, p := range []policy{throttlePolicy(keySingle, 0), throttlePolicy(keyThrottle, 0)} {
		if ctx.Err() != nil {
			return out
		}
		progress("throttle-fleet: %s in %d processes at %g/s each, %d operations", p.name, sharedProcesses, sharedRate, len(arr))
		r := runShedding(ctx, c, "throttle-fleet", ph, arr, p, sharedProcesses, capacity)
		if p.key == keySingle {
			out.single = r
		} else {
			out.alone = r
		}
	}
	progress("throttle-fleet: throttle with shared state in %d processes at %g/s each, %d operations", sharedProcesses, sharedRate, len(arr))
	out.shared, out.commands, out.err = runSharedShedding(ctx, c, rt, ph, arr, capacity)
	return out
}

// runSharedShedding is runShedding for the processes sharing their
// throttle's counts through rt: every process's connections and
// subscription are made before the commands are counted, since they are
// the process's, not its operations'.
func runSharedShedding(ctx context.Context, c tconfig, rt *redisTarget, ph []phase, arr []arrival, capacity int) (*trun, map[string]int64, error) {
	admin := rt.connect(nopHook{})
	defer admin.Close()
	prefix := "throttle-fleet:" + strconv.FormatInt(time.Now().UnixNano(), 36)
	p := sharedPolicy(rt, prefix)
	f := newFleet(p, sharedProcesses)
	defer f.closeIdle()
	if err := waitSubscribed(ctx, admin, sharedProcesses); err != nil {
		return nil, nil, err
	}
	if err := admin.ConfigResetStat(ctx).Err(); err != nil {
		return nil, nil, err
	}
	runtime.GC()
	srv := newServer(ph, capacity, c.service, total(ph)+c.deadline+time.Second)
	ops := driveTo(ctx, srv.start, arr, c.deadline, func(i int) dest {
		return dest{client: f.client(i), url: srv.url()}
	})
	wall := time.Since(srv.start)
	// The flushes of the last counts.
	time.Sleep(2 * redisretry.DefaultStateFlush)
	stats, err := commandStats(ctx, admin)
	srv.close()
	if err != nil {
		return nil, nil, err
	}
	r := &trun{run: &run{
		scenario: "throttle-fleet", policy: p, processes: sharedProcesses, phases: ph, deadline: c.deadline,
		hits: srv.hits.Load(), hitsByPhase: timeline(srv.byPhase), hitsAt: timeline(srv.hitsAt),
		connsAt: timeline(srv.connsAt), conns: srv.conns.Load(), shed: srv.shed.Load(), down: srv.down.Load(), wall: wall,
	}}
	for _, o := range ops {
		r.ops = append(r.ops, o.opResult)
		r.local = append(r.local, o.local)
	}
	return r, stats, nil
}

// sharedPolicy is the throttle policy with each process's counts shared
// under prefix through rt.
func sharedPolicy(rt *redisTarget, prefix string) policy {
	return policy{key: keyShared, name: "throttle, shared state", ours: true,
		desc: "the throttle policy with Throttle.Shared a redisretry.ThrottleState of its zero options (1/24 of the counts sent, a rare accept up to 8 times as often, " +
			"a 60ms bucket, sent after 20ms, published every 60ms), one per process, each on a go-redis client of its own",
		new: func() (*http.Client, func()) {
			rdb := rt.connect(nopHook{})
			// Its connection is made now, with the process: a
			// pipeline's, the one its flushes use.
			_, _ = rdb.Pipelined(context.Background(), func(p redis.Pipeliner) error {
				p.Ping(context.Background())
				return nil
			})
			st, err := redisretry.NewThrottleState(rdb, prefix, redisretry.ThrottleStateOptions{})
			if err != nil {
				panic(err) // a client and a prefix of this command: cannot happen
			}
			base := cleanhttp.DefaultPooledTransport()
			t := &httpretry.Transport{Base: base, Throttle: &throttle.Throttle{Shared: st}, BudgetPerHost: true}
			return &http.Client{Transport: t}, func() {
				base.CloseIdleConnections()
				st.Close()
				rdb.Close()
			}
		}}
}

// waitSubscribed waits until n clients hold a pattern subscription.
func waitSubscribed(ctx context.Context, admin redis.UniversalClient, n int) error {
	deadline := time.Now().Add(time.Minute)
	for {
		list, err := admin.ClientList(ctx).Result()
		if err == nil && strings.Count(list, " psub=1 ") >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("throttle-fleet: %d processes not subscribed within a minute (%v)", n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// commandStats returns the calls of each command since the last reset,
// from INFO commandstats, without the admin's own (INFO, CONFIG, CLIENT).
func commandStats(ctx context.Context, admin redis.UniversalClient) (map[string]int64, error) {
	info, err := admin.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		if name == "info" || strings.HasPrefix(name, "config|") || strings.HasPrefix(name, "client|list") {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("commandstats: %q: %w", line, err)
		}
		out[name] = n
	}
	return out, nil
}

// nopHook is a go-redis hook that does nothing: the server counts.
type nopHook struct{}

func (nopHook) DialHook(next redis.DialHook) redis.DialHook                               { return next }
func (nopHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook                      { return next }
func (nopHook) ProcessPipelineHook(n redis.ProcessPipelineHook) redis.ProcessPipelineHook { return n }

// sharedFleetLine reports the shared-state fleet, with the throttle
// without shared state on the same arrivals in parentheses.
func sharedFleetLine(s *sharedRun) (string, []target, bool) {
	if s == nil {
		return "", nil, false
	}
	if s.err != nil || s.shared == nil || s.single == nil {
		return fmt.Sprintf("throttle-fleet: P=%d at %g/s each: not run: %v", sharedProcesses, sharedRate, s.err),
			[]target{{name: "throttle-fleet shared state: ran", measured: fmt.Sprint(s.err), met: false}}, true
	}
	m := measureOutage(s.shared, s.single)
	perOp := float64(s.total()) / float64(max(s.ops, 1))
	l := fmt.Sprintf("throttle-fleet: P=%d at %g/s each, outage load %.2fx, recovery %s, %.3f Redis commands per operation",
		sharedProcesses, sharedRate, m.load, recoveryText(m.recovery, m.recovered), perOp)
	if s.alone != nil {
		a := measureOutage(s.alone, s.single)
		l = withOthers(l, []string{fmt.Sprintf("without shared state: load %.2fx, recovery %s", a.load, recoveryText(a.recovery, a.recovered))})
	}
	name := fmt.Sprintf("throttle-fleet P=%d at %g/s, shared state", sharedProcesses, sharedRate)
	ts := []target{
		{name: name + ": server load during the outage ≤ 0.25× offered", measured: fmt.Sprintf("%.3f×", m.load), met: m.load <= maxOutageLoad},
		{name: name + ": ≥ 95% of single attempt's goodput within 2 s of healing", measured: recoveryText(m.recovery, m.recovered), met: m.recovered && m.recovery <= maxRecovery},
		{name: name + ": ≤ 0.1 Redis commands per operation", measured: fmt.Sprintf("%.3f (%d commands, %d operations)", perOp, s.total(), s.ops), met: perOp <= maxRedisPerOp},
	}
	return l, ts, true
}

// sharedSection writes the shared-state fleet's section of throttle.md.
func sharedSection(b *strings.Builder, s *sharedRun) {
	if s == nil || s.shared == nil {
		return
	}
	fmt.Fprintf(b, "## Fleet with shared state\n\nThe outage over P = %d processes, each calling %g times a second (%d operations in all), "+
		"simulated in one program: every process its own Transport, Throttle, ThrottleState and go-redis client, on one redis-server; "+
		"its connections and subscription made before the commands are counted. Recovery against the single attempt of these processes.\n\n",
		sharedProcesses, sharedRate, s.ops)
	runs := []*trun{s.single, s.shared}
	if s.alone != nil {
		runs = []*trun{s.single, s.alone, s.shared}
	}
	outageTable(b, runs, s.single)
	names := make([]string, 0, len(s.commands))
	for k := range s.commands {
		names = append(names, k)
	}
	slices.Sort(names)
	b.WriteString("Redis commands over the run (INFO commandstats: every command the server ran, pipelined ones included):\n\n| command | calls |\n|---|---|\n")
	for _, k := range names {
		fmt.Fprintf(b, "| %s | %d |\n", k, s.commands[k])
	}
	fmt.Fprintf(b, "| all | %d, %.3f per operation |\n\n", s.total(), float64(s.total())/float64(max(s.ops, 1)))
}
