package redisretry

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/httpretry/httpretry/internal/throttleseam"
	"github.com/httpretry/httpretry/throttle"
	"github.com/redis/go-redis/v9"
)

// fleetProcess is one process of a fleet: a Throttle sharing its counts
// through a ThrottleState of its own, on a client of its own.
type fleetProcess struct {
	th    *throttle.Throttle
	state *ThrottleState
	rdb   *redis.Client
}

// newFleetProcess starts a process sharing prefix on addr. Its draws are
// 0.5: refused exactly when the refusal probability is above one half.
func newFleetProcess(t *testing.T, addr, prefix string, o ThrottleStateOptions) *fleetProcess {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true, Protocol: 2, MaxRetries: -1})
	st, err := NewThrottleState(rdb, prefix, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		st.Close()
		rdb.Close()
	})
	return &fleetProcess{th: drawing(&throttle.Throttle{Shared: st}, func() float64 { return 0.5 }), state: st, rdb: rdb}
}

// get is a GET to host, as the throttle looks it up.
func get(host string) *http.Request {
	return httptest.NewRequest(http.MethodGet, "http://"+host+"/x", nil)
}

// refused reports whether p's throttle refuses an operation to host now.
func (p *fleetProcess) refused(host string) bool {
	req := get(host)
	_, _, err := p.th.Admit(p.th.Dest(req), req, nil)
	return errors.Is(err, throttle.ErrThrottled)
}

// record records n results of host: overloaded (503) or accepted (200).
func (p *fleetProcess) record(host string, n int, overload bool) {
	d := p.th.Dest(get(host))
	for range n {
		st := http.StatusOK
		if overload {
			st = http.StatusServiceUnavailable
		}
		p.th.Record(d, &throttle.Result{Status: st, Overload: overload}, nil)
	}
}

// TestThrottleStateAProcessLearnsAnOutageFromTheFleet: process B never
// called the destination; process A sees 200 overload answers. B, on its
// first operation, is refused on the fleet's counts, as one process
// that saw them all would be; a destination A never called stays open
// to B.
func TestThrottleStateAProcessLearnsAnOutageFromTheFleet(t *testing.T) {
	t.Parallel()
	srv := redisFor(t)
	o := ThrottleStateOptions{Share: 1}
	a := newFleetProcess(t, srv, "ts-learn", o)
	b := newFleetProcess(t, srv, "ts-learn", o)
	if b.refused("api.example") {
		t.Fatal("B refused before anyone counted anything")
	}
	eventually(t, "B refuses on A's overload answers", func() bool {
		a.record("api.example", 20, true)
		return b.refused("api.example")
	})
	if b.refused("other.example") {
		t.Error("B refused a destination nobody signalled")
	}
	// B's own window holds only its refusals: it decided on A's counts.
	if req, acc := throttleseam.Counts(b.th, "api.example"); acc != 0 || req > 5 {
		t.Errorf("B's own counts %v requests, %v accepts; want a few refusals and no accept", req, acc)
	}
}

// TestThrottleStateTheFleetsAcceptsEndTheRefusals: once the fleet's
// processes are accepted again, a process whose own last answers were
// all overload admits again without sending an attempt of its own.
func TestThrottleStateTheFleetsAcceptsEndTheRefusals(t *testing.T) {
	t.Parallel()
	srv := redisFor(t)
	o := ThrottleStateOptions{Share: 1}
	a := newFleetProcess(t, srv, "ts-heal", o)
	b := newFleetProcess(t, srv, "ts-heal", o)
	b.record("api.example", 10, true)
	eventually(t, "B refuses during the outage", func() bool {
		a.record("api.example", 20, true)
		return b.refused("api.example")
	})
	eventually(t, "B admits once A is accepted again", func() bool {
		a.record("api.example", 50, false)
		return !b.refused("api.example")
	})
}

// TestThrottleStateCostsAtMostShareCommandsPerCount: a hundred processes
// making 20 failing operations each (a refusal or an overload answer a
// count) cost the Redis server, counted by INFO commandstats (every
// command, those a pipeline carries included), about Share per count
// plus at most five per publication (a claim each process that was due
// made, read, expiry, drop, publish), and the hash holds at most the buckets a
// publication reads and those not yet dropped.
func TestThrottleStateCostsAtMostShareCommandsPerCount(t *testing.T) {
	t.Parallel()
	s, admin := server(t)
	const processes, ops = 100, 20
	// A patient CallTimeout: on a loaded machine a call cut short
	// redials, and its handshake would be counted.
	o := ThrottleStateOptions{Share: 1.0 / 16, CallTimeout: 5 * time.Second}
	fleet := make([]*fleetProcess, processes)
	for i := range fleet {
		fleet[i] = newFleetProcess(t, s.Addr(), "ts-cost", o)
	}
	ctx := context.Background()
	// The subscriptions and connections are made before counting
	// starts: they are a process's, not its counts'.
	eventually(t, "every process subscribed", func() bool { return subscribers(t, admin) == processes })
	for _, p := range fleet {
		warm(t, p.rdb)
	}
	if err := admin.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for range ops {
		for _, p := range fleet {
			if !p.refused("api.example") {
				p.record("api.example", 1, true)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // the last flushes
	stats := commandStats(t, admin)
	counts := float64(processes * ops)
	t.Logf("commands: %v", stats)
	pubs := stats["publish"]
	total := 0
	for name, n := range stats {
		if name != "config|resetstat" && name != "info" {
			total += n
		}
	}
	// Sends are random: 1.5 times their mean is far out of reach.
	if most := 1.5*counts/16 + 5*float64(pubs); float64(total) > most {
		t.Errorf("%v counts cost %d commands (%v); want at most %.0f", counts, total, stats, most)
	}
	if stats["hincrby"] == 0 || pubs == 0 {
		t.Errorf("no counts sent or none published: %v", stats)
	}
	n, err := admin.HLen(ctx, "ts-cost{api.example}").Result()
	if err != nil || n > 3*fleetRing {
		t.Errorf("the hash holds %d buckets (err %v); want at most %d", n, err, 3*fleetRing)
	}
	if ttl := admin.PTTL(ctx, "ts-cost{api.example}").Val(); ttl <= 0 || ttl > 10*time.Second {
		t.Errorf("the hash's TTL is %v; want within 10s", ttl)
	}
}

// TestThrottleStateHealthyFleetMakesNoCommand: accepted answers of a
// destination that signalled nothing, here or in the fleet, cost Redis
// nothing.
func TestThrottleStateHealthyFleetMakesNoCommand(t *testing.T) {
	t.Parallel()
	s, admin := server(t)
	p := newFleetProcess(t, s.Addr(), "ts-healthy", ThrottleStateOptions{Share: 1})
	ctx := context.Background()
	eventually(t, "subscribed", func() bool { return subscribers(t, admin) == 1 })
	warm(t, p.rdb)
	admin.ConfigResetStat(ctx)
	for range 1000 {
		if p.refused("api.example") {
			t.Fatal("refused a healthy destination")
		}
		p.record("api.example", 1, false)
	}
	time.Sleep(3 * DefaultStateFlush)
	for name, n := range commandStats(t, admin) {
		if name != "config|resetstat" && name != "info" {
			t.Errorf("a healthy fleet sent %d %s", n, name)
		}
	}
}

// redisFor starts a redis-server for t and returns its address.
func redisFor(t *testing.T) string {
	s, _ := server(t)
	return s.Addr()
}

// commandStats returns the calls of each command INFO commandstats
// lists, by name.
func commandStats(t *testing.T, rdb *redis.Client) map[string]int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		n, _ := strconv.Atoi(calls)
		out[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return out
}

// subscribers counts the clients with a pattern subscription.
func subscribers(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	list, err := rdb.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(list, " psub=1 ")
}

// warm makes rdb's connection for pipelines, so that its handshake is
// not counted with the commands under test.
func warm(t *testing.T, rdb *redis.Client) {
	t.Helper()
	if _, err := rdb.Pipelined(context.Background(), func(p redis.Pipeliner) error {
		p.Ping(context.Background())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestThrottleStateSharingResumesAfterRedisRestarts: Redis killed (its
// counts gone) and started again on the same port: each process's
// subscription is made again, with backoff, and a process learns an
// outage from another's counts as before.
func TestThrottleStateSharingResumesAfterRedisRestarts(t *testing.T) {
	t.Parallel()
	s, admin := server(t)
	o := ThrottleStateOptions{Share: 1, Stale: 300 * time.Millisecond}
	a := newFleetProcess(t, s.Addr(), "ts-restart", o)
	b := newFleetProcess(t, s.Addr(), "ts-restart", o)
	eventually(t, "B refuses on A's counts", func() bool {
		a.record("api.example", 20, true)
		return b.refused("api.example")
	})
	s.Kill()
	a.record("api.example", 20, true) // sent to nobody: dropped
	eventually(t, "B's fleet counts go stale", func() bool { return !b.state.Hot("api.example") })
	s.Restart(t)
	eventually(t, "both processes subscribed again", func() bool { return subscribers(t, admin) == 2 })
	// Another destination, so that B's own refusals of the first do not
	// decide: it learns this one from A alone.
	eventually(t, "B refuses on A's counts after the restart", func() bool {
		a.record("db.example", 20, true)
		return b.refused("db.example")
	})
}

// TestThrottleStateKeysWithBracesAndManyDestinationsStayBounded: a
// destination key holding braces is published and heard under its own
// name, and a process keeps the publications of at most MaxDestinations
// destinations, whatever the fleet publishes.
func TestThrottleStateKeysWithBracesAndManyDestinationsStayBounded(t *testing.T) {
	t.Parallel()
	addr := redisFor(t)
	o := ThrottleStateOptions{Share: 1, MaxDestinations: 3}
	a := newFleetProcess(t, addr, "ts-bound", ThrottleStateOptions{Share: 1})
	b := newFleetProcess(t, addr, "ts-bound", o)
	key := "tenant{a}:api.example"
	keyed := func(p *fleetProcess) *throttle.Throttle {
		return drawing(&throttle.Throttle{Shared: p.state, Key: func(*http.Request) string { return key }}, func() float64 { return 0.5 })
	}
	ta, tb := keyed(a), keyed(b)
	eventually(t, "B refuses the braced key on A's counts", func() bool {
		d := ta.Dest(get("x"))
		for range 20 {
			ta.Record(d, &throttle.Result{Status: http.StatusServiceUnavailable, Overload: true}, nil)
		}
		req := get("x")
		_, _, err := tb.Admit(tb.Dest(req), req, nil)
		return errors.Is(err, throttle.ErrThrottled)
	})
	for i := range 20 {
		a.record("host"+strconv.Itoa(i)+".example", 20, true)
	}
	time.Sleep(500 * time.Millisecond)
	if n := b.state.ndests.Load(); n > 3 {
		t.Errorf("B holds %d destinations; want at most MaxDestinations, 3", n)
	}
}

// TestThrottleStateClosedKeepsNothing: a Throttle that still holds a
// closed ThrottleState decides on its own counts and piles up no counts
// to send; Close twice is harmless.
func TestThrottleStateClosedKeepsNothing(t *testing.T) {
	t.Parallel()
	p := newFleetProcess(t, redisFor(t), "ts-closed", ThrottleStateOptions{Share: 1})
	p.state.Close()
	p.state.Close()
	p.record("api.example", 1000, true)
	if !p.refused("api.example") {
		t.Error("its own 1,000 overload answers did not refuse")
	}
	if d := p.state.dest("api.example", false); d != nil && len(d.pending) != 0 {
		t.Errorf("%d buckets of counts pending after Close; want none", len(d.pending))
	}
}

// TestThrottleStateForgetsQuietDestinationsToLearnNewOnes: a process
// bounded to 3 destinations has heard the fleet's outages of 3, all over
// and quiet for longer than Stale. A fourth destination's outage, later,
// is still learned from the fleet: the bound keeps the destinations held
// now, not the first ones ever heard, so that a long-lived process of a
// fleet calling many destinations does not stop sharing for good once
// it has heard of MaxDestinations.
func TestThrottleStateForgetsQuietDestinationsToLearnNewOnes(t *testing.T) {
	t.Parallel()
	addr := redisFor(t)
	o := ThrottleStateOptions{Share: 1, Stale: 300 * time.Millisecond}
	a := newFleetProcess(t, addr, "ts-forget", o)
	o.MaxDestinations = 3
	b := newFleetProcess(t, addr, "ts-forget", o)
	for i := range 3 {
		host := "old" + strconv.Itoa(i) + ".example"
		eventually(t, "B hears "+host, func() bool {
			a.record(host, 20, true)
			return b.state.Hot(host)
		})
	}
	eventually(t, "the old outages go stale", func() bool {
		for i := range 3 {
			if b.state.Hot("old" + strconv.Itoa(i) + ".example") {
				return false
			}
		}
		return true
	})
	time.Sleep(o.Stale) // quiet for longer than Stale
	eventually(t, "B refuses a new destination on A's counts", func() bool {
		a.record("new.example", 20, true)
		return b.refused("new.example")
	})
	if n := b.state.ndests.Load(); n > 3 {
		t.Errorf("B holds %d destinations; want at most MaxDestinations, 3", n)
	}
}

// drawing makes th draw the number of each decision that may refuse from
// draw (see throttleseam.SetDraw), and returns th.
func drawing(th *throttle.Throttle, draw func() float64) *throttle.Throttle {
	throttleseam.SetDraw(th, draw)
	return th
}
