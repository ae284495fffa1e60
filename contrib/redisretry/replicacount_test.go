package redisretry

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/httpretry/httpretry/idempotency"
	"github.com/redis/go-redis/v9"
)

// primaryWithReplicas starts a primary and n replicas of it, and returns
// the servers, primary first, once the primary's ROLE lists n replicas.
func primaryWithReplicas(t *testing.T, n int) []*redistest.Server {
	t.Helper()
	primary := redistest.Start(t)
	host, port, _ := strings.Cut(primary.Addr(), ":")
	servers := []*redistest.Server{primary}
	for range n {
		servers = append(servers, redistest.Start(t, "--replicaof", host, port))
	}
	rdb := primary.Client(t)
	eventually(t, "every replica online", func() bool { return roleLists(rdb) == n })
	return servers
}

// roleLists returns how many replicas the master's ROLE lists, or -1.
// ROLE, which the store reads, lists a replica once its first sync is
// done; INFO's connected_slaves counts it from the moment it connects.
func roleLists(rdb *redis.Client) int {
	n, err := parseRole(rdb.Do(context.Background(), "role"))
	if err != nil {
		return -1
	}
	return n
}

// A master with two replicas: a store whose WaitReplicas counts one of
// them refuses every write with ErrReplicasUncounted (WAIT 1 would be
// satisfied by a replica that a switchover then makes drop the write),
// leaving the key free; one that counts both reserves, and the
// reservation is on both replicas when Reserve returns.
func TestWaitReplicasBelowTheReplicaCountRefusesTheWrite(t *testing.T) {
	ctx := context.Background()
	servers := primaryWithReplicas(t, 2)
	rdb := servers[0].Client(t)
	one, prefix := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient, WaitReplicas: 1, WaitTimeout: 10 * time.Second})
	_, err := one.Reserve(ctx, "k", "fp", time.Minute)
	if !errors.Is(err, ErrReplicasUncounted) || errors.Is(err, ErrNotReplicated) ||
		!strings.Contains(err.Error(), "the master has 2 replicas now") || !strings.Contains(err.Error(), "WaitReplicas is 1") {
		t.Fatalf("Reserve with WaitReplicas 1 on a master with 2 replicas = %v; want ErrReplicasUncounted naming both counts", err)
	}
	if n := rdb.Exists(ctx, recordKey(prefix, "k"), lockKey(prefix, "k")).Val(); n != 0 {
		t.Fatalf("%d of the refused key's record and lock left; want 0", n)
	}

	both, prefix2 := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient, WaitReplicas: 2, WaitTimeout: 10 * time.Second})
	r, err := both.Reserve(ctx, "k", "fp", time.Minute)
	if err != nil || r.State != idempotency.StateReserved {
		t.Fatalf("Reserve with WaitReplicas 2 = %+v, %v; want reserved", r, err)
	}
	for _, replica := range servers[1:] {
		if got := replica.Client(t).HGet(ctx, recordKey(prefix2, "k"), "tok").Val(); got != tokenArg(r.Token) {
			t.Fatalf("replica %s holds token %q right after Reserve; want %d", replica.Addr(), got, r.Token)
		}
	}
	// Complete is judged the same way: recorded on the primary, refused.
	r1, err := both.Reserve(ctx, "k1", "fp", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	quick, _ := NewIdempotencyStore(rdb, prefix2, IdempotencyOptions{CallTimeout: patient, WaitReplicas: 1, WaitTimeout: 10 * time.Second})
	if err := quick.Complete(ctx, "k1", r1.Token, &idempotency.Response{Status: 201}, time.Minute); !errors.Is(err, ErrReplicasUncounted) {
		t.Fatalf("Complete with WaitReplicas 1 = %v; want ErrReplicasUncounted", err)
	}
}

// The old primary of a switchover lists one replica fewer while it still
// takes writes: a store that saw it with two replicas keeps refusing a
// WaitReplicas of one after a replica left, for replicaMemory, instead of
// starting to acknowledge writes that one replica holds.
func TestWaitReplicasRemembersTheReplicasAMasterHadLately(t *testing.T) {
	ctx := context.Background()
	servers := primaryWithReplicas(t, 2)
	rdb := servers[0].Client(t)
	s, _ := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient, WaitReplicas: 1, WaitTimeout: 10 * time.Second})
	if _, err := s.Reserve(ctx, "a", "fp", time.Minute); !errors.Is(err, ErrReplicasUncounted) {
		t.Fatalf("Reserve with two replicas = %v; want ErrReplicasUncounted", err)
	}
	servers[2].Kill()
	eventually(t, "the killed replica detached", func() bool { return roleLists(rdb) == 1 })
	_, err := s.Reserve(ctx, "b", "fp", time.Minute)
	if !errors.Is(err, ErrReplicasUncounted) || !strings.Contains(err.Error(), "has 1 replicas now, and a master had 2 within 1m0s") {
		t.Fatalf("Reserve with one replica left = %v; want ErrReplicasUncounted: the master had two within the minute", err)
	}
	// A store that never saw the second replica counts the one there is.
	fresh, _ := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient, WaitReplicas: 1, WaitTimeout: 10 * time.Second})
	if r, err := fresh.Reserve(ctx, "b", "fp", time.Minute); err != nil || r.State != idempotency.StateReserved {
		t.Fatalf("Reserve of a store new to the master = %+v, %v; want reserved", r, err)
	}
}

// remember keeps the most replicas seen for replicaMemory after it was
// last seen, and takes a higher or equal count at once.
func TestRememberKeepsTheMostReplicasForAMinute(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		last      sighting
		connected int
		now       time.Time
		want      sighting
	}{
		{"first sighting", sighting{}, 2, t0, sighting{2, t0}},
		{"none at first", sighting{}, 0, t0, sighting{0, t0}},
		{"more replicas", sighting{1, t0}, 2, t0.Add(time.Second), sighting{2, t0.Add(time.Second)}},
		{"as many, refreshed", sighting{2, t0}, 2, t0.Add(30 * time.Second), sighting{2, t0.Add(30 * time.Second)}},
		{"fewer, remembered", sighting{2, t0}, 1, t0.Add(time.Second), sighting{2, t0}},
		{"fewer, just before forgetting", sighting{2, t0}, 1, t0.Add(replicaMemory - time.Nanosecond), sighting{2, t0}},
		{"fewer, forgotten", sighting{2, t0}, 1, t0.Add(replicaMemory), sighting{1, t0.Add(replicaMemory)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := remember(tc.last, tc.connected, tc.now); got != tc.want {
				t.Fatalf("remember(%v, %d, +%v) = %v; want %v", tc.last, tc.connected, tc.now.Sub(t0), got, tc.want)
			}
		})
	}
	var c replicaCounts
	if got := c.see(2, t0); got != 2 {
		t.Fatalf("see 2 = %d; want 2", got)
	}
	if got := c.see(0, t0.Add(time.Second)); got != 2 {
		t.Fatalf("see 0 = %d; want 2 remembered: a master just promoted, its replicas not attached yet", got)
	}
	if got := c.see(1, t0.Add(replicaMemory)); got != 1 {
		t.Fatalf("see 1 a minute later = %d; want 1", got)
	}
}

// parseRole counts the replicas of a master's ROLE reply and refuses
// anything else.
func TestParseRole(t *testing.T) {
	t.Parallel()
	replica := []any{"127.0.0.1", "6380", "123"}
	for _, tc := range []struct {
		name  string
		reply any
		err   error
		want  int
	}{
		{"no replica", []any{"master", int64(10), []any{}}, nil, 0},
		{"two replicas", []any{"master", int64(10), []any{replica, replica}}, nil, 2},
		{"a replica", []any{"slave", "127.0.0.1", int64(6379), "connected", int64(10)}, errors.New("reply of 5 fields"), 0},
		{"a sentinel", []any{"sentinel", []any{"primary"}}, errors.New("reply of 2 fields"), 0},
		{"not a master", []any{"slave", int64(1), []any{}}, errNotMaster, 0},
		{"no list", []any{"master", int64(1), "x"}, errors.New("replicas field string"), 0},
		{"an error", redis.ErrClosed, redis.ErrClosed, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := redis.NewCmd(context.Background())
			if err, ok := tc.reply.(error); ok {
				cmd.SetErr(err)
			} else {
				cmd.SetVal(tc.reply)
			}
			got, err := parseRole(cmd)
			switch {
			case tc.err == nil && (err != nil || got != tc.want):
				t.Fatalf("parseRole = %d, %v; want %d", got, err, tc.want)
			case tc.err != nil && (err == nil || !(errors.Is(err, tc.err) || strings.HasPrefix(err.Error(), tc.err.Error()))):
				t.Fatalf("parseRole = %d, %v; want an error like %v", got, err, tc.err)
			}
		})
	}
}
