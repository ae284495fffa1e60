package redisretry

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
)

// A Budget on a Redis whose maxmemory-policy may evict its keys takes no
// token from it: the first call answers an error wrapping
// ErrBudgetEviction that names the policy, changes nothing in Redis, and
// the Budget withdraws from its local bucket instead. With AllowEviction
// the same server is used.
func TestBudgetOnRedisThatMayEvictUsesLocalBucket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, policy := range []string{"allkeys-lru", "volatile-ttl", "volatile-lru", "allkeys-random"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t, "--maxmemory-policy", policy)
			rdb := srv.Client(t)
			key := "evicts-" + policy
			b := newBudget(t, rdb, key, 20, 0.1, Options{FleetSize: 4, CallTimeout: patient, FlushInterval: time.Hour})
			b.Deposit()
			err := b.Flush(ctx)
			if !errors.Is(err, ErrBudgetEviction) || !strings.Contains(err.Error(), policy) {
				t.Fatalf("Flush = %v; want an error wrapping ErrBudgetEviction that names %s", err, policy)
			}
			if s := b.State(); s != Local {
				t.Fatalf("state = %v; want local", s)
			}
			if n := drain(t, b); n != 5 {
				t.Errorf("granted %d; want the local bucket's 20/4 = 5", n)
			}
			if n, err := rdb.Exists(ctx, key).Result(); err != nil || n != 0 {
				t.Errorf("EXISTS %s = %d, %v; want 0: nothing written to a Redis that may evict", key, n, err)
			}

			allowed := newBudget(t, rdb, key, 20, 0.1, Options{CallTimeout: patient, FlushInterval: time.Hour, AllowEviction: true})
			if n := drain(t, allowed); n != 20 {
				t.Errorf("with AllowEviction granted %d; want the shared bucket's 20", n)
			}
		})
	}
}

// The policy is checked on the server that runs the call: a policy
// changed at run time to one that evicts is seen within the life of the
// marker of the last check, and the Budget falls back to its local
// bucket; changed back, the Budget returns to the shared bucket.
func TestBudgetSeesEvictionPolicyChangedAtRunTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, rdb := server(t)
	b := newBudget(t, rdb, "evicts-later", 20, 0.1, Options{CallTimeout: patient, FlushInterval: 10 * time.Millisecond, MaxProbeInterval: 50 * time.Millisecond})
	if !b.Withdraw(ctx) || b.State() != Shared {
		t.Fatalf("Withdraw on a noeviction Redis: state %v; want a shared token", b.State())
	}
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "falls back on allkeys-lru", func() bool {
		b.Deposit() // something for the flusher to send
		return b.State() == Local
	})
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "back to the shared bucket on noeviction", func() bool { return b.State() == Shared })
}

// A Sentinel failover to a replica configured to evict: the new primary
// is checked before the Budget's first call on it, and the Budget falls
// back to its local bucket rather than trust a verdict about the old one.
func TestBudgetChecksTheNewPrimaryAfterFailover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := redistest.StartSentinel(t)
	rdb := s.Client(t)
	b := newBudget(t, rdb, "evicts-after-failover", 20, 0.1, Options{CallTimeout: patient, FlushInterval: 10 * time.Millisecond, MaxProbeInterval: 50 * time.Millisecond})
	if !b.Withdraw(ctx) || b.State() != Shared {
		t.Fatalf("Withdraw on the noeviction primary: state %v; want a shared token", b.State())
	}
	replica, err := s.Replica()
	if err != nil {
		t.Fatal(err)
	}
	if err := replica.Client(t).ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Failover(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "falls back on the evicting new primary", func() bool {
		b.Deposit()
		return b.State() == Local
	})
}

// A Redis that hides INFO cannot tell its eviction policy: the Budget
// treats it as one that may evict, with an error that says so, and uses
// it with AllowEviction.
func TestBudgetOnRedisWithoutINFOUsesLocalBucketUnlessAllowed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Start(t, "--rename-command", "INFO", "")
	rdb := srv.Client(t)
	b := newBudget(t, rdb, "no-info", 20, 0.1, Options{FleetSize: 4, CallTimeout: patient, FlushInterval: time.Hour})
	b.Deposit()
	err := b.Flush(ctx)
	if !errors.Is(err, ErrBudgetEviction) || !strings.Contains(err.Error(), "INFO") {
		t.Fatalf("Flush = %v; want an error wrapping ErrBudgetEviction that names INFO", err)
	}
	if n := drain(t, b); n != 5 {
		t.Errorf("granted %d; want the local bucket's 20/4 = 5", n)
	}
	allowed := newBudget(t, rdb, "no-info", 20, 0.1, Options{CallTimeout: patient, FlushInterval: time.Hour, AllowEviction: true})
	if n := drain(t, allowed); n != 20 {
		t.Errorf("with AllowEviction granted %d; want the shared bucket's 20", n)
	}
}

// A noeviction Redis past its maxmemory refuses writes: the Budget's call
// changes nothing and the Budget withdraws from its local bucket.
func TestBudgetOnAFullNoevictionRedisUsesLocalBucket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Start(t, "--maxmemory", "2mb", "--maxmemory-policy", "noeviction")
	rdb := srv.Client(t)
	value := strings.Repeat("v", 1024)
	for i := 0; ; i++ {
		err := rdb.Set(ctx, "fill:"+strconv.Itoa(i), value, 0).Err()
		if err != nil && strings.Contains(err.Error(), "OOM") {
			break
		}
		if err != nil || i > 100_000 {
			t.Fatalf("filling the server: %v after %d keys", err, i)
		}
	}
	b := newBudget(t, rdb, "full", 20, 0.1, Options{FleetSize: 4, CallTimeout: patient, FlushInterval: time.Hour})
	b.Deposit()
	err := b.Flush(ctx)
	t.Logf("Flush on a full Redis: %v", err)
	if err == nil || b.State() != Local {
		t.Fatalf("Flush = %v, state %v; want an error and the local bucket", err, b.State())
	}
	if n := drain(t, b); n != 5 {
		t.Errorf("granted %d; want the local bucket's 20/4 = 5", n)
	}
	if n, err := rdb.Exists(ctx, "full").Result(); err != nil || n != 0 {
		t.Errorf("EXISTS full = %d, %v; want 0: a full Redis took no write", n, err)
	}
}
