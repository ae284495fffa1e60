//go:build drills

// The failover drills kill and fail over real servers under traffic and
// take minutes; `make redis-drills` runs them (make test does too):
//
//	go test -race -count=1 -tags drills -run '^TestDrill' .
package redisretry_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry"
	"github.com/httpretry/httpretry/contrib/redisretry/internal/failoverdrill"
	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/httpretry/httpretry/idempotency"
)

// keyLog is what the drill saw of each key: the tokens Reserve issued
// for it, in order, and whether its response was recorded.
type keyLog struct {
	mu     sync.Mutex
	tokens map[string][]idempotency.Token
	wrong  []string // replies that carried another key's response
}

func (l *keyLog) issued(t *testing.T, key string, tok idempotency.Token) {
	l.mu.Lock()
	defer l.mu.Unlock()
	prev := l.tokens[key]
	if n := len(prev); n > 0 && tok <= prev[n-1] {
		t.Errorf("%s: token %d issued after %d; want strictly increasing", key, tok, prev[n-1])
	}
	l.tokens[key] = append(prev, tok)
}

func (l *keyLog) replayed(key string, resp *idempotency.Response) {
	if resp != nil && string(resp.Body) == "response of "+key {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	body := "<nil>"
	if resp != nil {
		body = string(resp.Body)
	}
	l.wrong = append(l.wrong, fmt.Sprintf("%s answered %q", key, body))
}

// A master of a 3-master Cluster (one replica each) is killed while two
// store instances reserve, complete and replay keys spread over every
// master. No key is ever answered another key's response; every key's
// tokens grow; calls fail only while the slots move; and after the
// failover every key works again within its lock's TTL: no lock is held
// by nobody for longer.
func TestDrillClusterMasterKilledMidTraffic(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartCluster(t, 3, 1)
	const lockTTL = 2 * time.Second
	var stores [2]*redisretry.IdempotencyStore
	for i := range stores {
		rdb := c.Client(t)
		s, err := redisretry.NewIdempotencyStore(rdb, "drill:", redisretry.IdempotencyOptions{CallTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = s
	}
	log := &keyLog{tokens: map[string][]idempotency.Token{}}
	var calls, failed atomic.Int64
	count := func(err error) bool {
		calls.Add(1)
		if err != nil {
			failed.Add(1)
			return false
		}
		return true
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var keys sync.Map
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("order-%d-%d", w, i)
				keys.Store(key, true)
				first, second := stores[i%2], stores[(i+1)%2]
				r, err := first.Reserve(ctx, key, "fp", lockTTL)
				if !count(err) {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				if r.State != idempotency.StateReserved {
					t.Errorf("%s: first Reserve = %v; want reserved", key, r.State)
					continue
				}
				log.issued(t, key, r.Token)
				resp := &idempotency.Response{Status: 201, Body: []byte("response of " + key)}
				if !count(first.Complete(ctx, key, r.Token, resp, time.Hour)) {
					continue
				}
				again, err := second.Reserve(ctx, key, "fp", lockTTL)
				if !count(err) {
					continue
				}
				switch again.State {
				case idempotency.StateCompleted:
					log.replayed(key, again.Response)
				case idempotency.StateReserved:
					// The completed record was lost with the master
					// before it reached the replica.
					log.issued(t, key, again.Token)
				}
			}
		})
	}
	time.Sleep(time.Second)
	killed, err := c.KillMaster(0)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	t.Logf("%d calls, %d failed around the failover", calls.Load(), failed.Load())
	if failed.Load() == calls.Load() {
		t.Fatalf("every one of %d calls failed; want the Cluster to serve again after the failover", calls.Load())
	}

	// Every key works again once its lock expired: completed with its
	// own response, or reservable (its reservation or record was lost
	// with the master, or its Complete failed).
	deadline := time.Now().Add(lockTTL + 30*time.Second)
	keys.Range(func(k, _ any) bool {
		key := k.(string)
		for {
			r, err := stores[0].Reserve(ctx, key, "fp", lockTTL)
			switch {
			case err == nil && r.State == idempotency.StateCompleted:
				log.replayed(key, r.Response)
				return true
			case err == nil && r.State == idempotency.StateReserved:
				log.issued(t, key, r.Token)
				return true
			}
			if time.Now().After(deadline) {
				t.Errorf("%s still %v, %v after the failover and its lock's TTL; want it usable", key, r.State, err)
				return false
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	for _, w := range log.wrong {
		t.Error(w)
	}
	killed.Restart(t)
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}
}

// Sentinel failovers during reservations: with WaitReplicas 1, no
// reservation that Reserve acknowledged is missing on the new primary,
// whether the primary was switched (SENTINEL FAILOVER, the old primary
// taking writes until it is made a replica) or killed. Without it
// reservations are lost (replication is asynchronous), how many depends
// on the machine: make redis-failover measures them.
func TestDrillSentinelFailoverLosesNoWaitedReservation(t *testing.T) {
	set := redistest.StartSentinel(t)
	for _, c := range []struct {
		how  string
		wait int
	}{
		{failoverdrill.Switch, 1},
		{failoverdrill.Kill, 1},
	} {
		name := fmt.Sprintf("%s_wait_%d", c.how, c.wait)
		res, err := failoverdrill.Failovers(failoverdrill.Sentinel{Set: set}, failoverdrill.Config{
			Runs: 2, Workers: 4, How: c.how, WaitReplicas: c.wait, Prefix: name + ":"})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Logf("%s: acked %d, lost %d %v, refused %d, errors %d", name, res.Acked, res.Lost, res.PerRun, res.Refused, res.Errors)
		if res.Acked == 0 {
			t.Errorf("%s: no reservation acknowledged; want traffic around the failovers", name)
		}
		if c.wait > 0 && res.Lost != 0 {
			t.Errorf("%s: %d acknowledged reservations lost; want 0 with WaitReplicas", name, res.Lost)
		}
	}
}

// A primary with two replicas behind three sentinels, switched over
// (SENTINEL FAILOVER) during reservations: for about a second the old
// primary stays master with the other replica attached, and clients keep
// writing to it. With WaitReplicas 2 (every replica) no reservation that
// Reserve acknowledged is missing on the new primary: the promoted
// replica no longer acknowledges the old primary's writes, so WAIT 2
// fails there. With WaitReplicas 1, which that other replica would
// satisfy, the store refuses every write (ErrReplicasUncounted)
// rather than acknowledge one a switchover drops.
func TestDrillSentinelSwitchoverWithTwoReplicasLosesNoAcknowledgedReservation(t *testing.T) {
	set := failoverdrill.Sentinel{Set: redistest.StartSentinelReplicas(t, 2)}
	every, err := failoverdrill.Failovers(set, failoverdrill.Config{
		Runs: 2, Workers: 4, How: failoverdrill.Switch, WaitReplicas: 2, Prefix: "wait-2:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("WaitReplicas 2: acked %d, lost %d %v, refused %d, errors %d", every.Acked, every.Lost, every.PerRun, every.Refused, every.Errors)
	if every.Acked == 0 || every.Lost != 0 {
		t.Errorf("WaitReplicas 2: acked %d, lost %d; want traffic around the switchovers and none lost", every.Acked, every.Lost)
	}
	one, err := failoverdrill.Failovers(set, failoverdrill.Config{
		Runs: 1, Workers: 4, How: failoverdrill.Switch, WaitReplicas: 1, Prefix: "wait-1:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("WaitReplicas 1: acked %d, lost %d %v, refused %d, errors %d", one.Acked, one.Lost, one.PerRun, one.Refused, one.Errors)
	if one.Acked != 0 || one.Lost != 0 || one.Refused == 0 {
		t.Errorf("WaitReplicas 1 with two replicas: acked %d, lost %d, refused %d; want every write refused", one.Acked, one.Lost, one.Refused)
	}
}

// A Cluster of three masters with two replicas each, the first master's
// first replica taking over at once (CLUSTER FAILOVER FORCE) during
// reservations: the old master takes writes until it learns of the new
// epoch, with its other replica attached, and the promoted replica lists
// its replicas one by one as they attach. With WaitReplicas 2 no
// reservation Reserve acknowledged is missing afterwards; WaitReplicas 1
// is refused throughout, on the promoted replica too.
func TestDrillClusterForcedFailoverWithTwoReplicasLosesNoAcknowledgedReservation(t *testing.T) {
	c := failoverdrill.Cluster{C: redistest.StartCluster(t, 3, 2)}
	res, err := failoverdrill.Failovers(c, failoverdrill.Config{
		Runs: 2, Workers: 4, How: failoverdrill.Force, WaitReplicas: 2, Prefix: "force-2:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("WaitReplicas 2: acked %d, lost %d %v, refused %d, errors %d", res.Acked, res.Lost, res.PerRun, res.Refused, res.Errors)
	if res.Acked == 0 || res.Lost != 0 {
		t.Errorf("acked %d, lost %d; want traffic around the failovers and none lost", res.Acked, res.Lost)
	}
	one, err := failoverdrill.Failovers(c, failoverdrill.Config{
		Runs: 1, Workers: 4, How: failoverdrill.Force, WaitReplicas: 1, Prefix: "force-1:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("WaitReplicas 1: acked %d, lost %d %v, refused %d, errors %d", one.Acked, one.Lost, one.PerRun, one.Refused, one.Errors)
	if one.Acked != 0 || one.Refused == 0 {
		t.Errorf("WaitReplicas 1 with two replicas: acked %d, refused %d; want every write refused", one.Acked, one.Refused)
	}
}
