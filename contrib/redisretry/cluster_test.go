package redisretry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/httpretry/httpretry/idempotency"
	"github.com/httpretry/httpretry/idempotency/storetest"
	"github.com/redis/go-redis/v9"
)

// The conformance suite against a Redis Cluster of three masters, with
// the store's prefix free of hash tags: every script touches one key's
// records only, which share the slot of the key's digest.
func TestIdempotencyStoreConformanceOnCluster(t *testing.T) {
	rdb := redistest.StartCluster(t, 3, 0).Client(t)
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		s, _ := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient})
		return s
	})
}

// The conformance suite against a Cluster of three masters with a replica
// each, waiting for the replica on every Reserve and Complete: the
// script and WAIT go to the master of the key's slot, on one connection.
func TestIdempotencyStoreConformanceOnClusterWaitingForReplicas(t *testing.T) {
	rdb := redistest.StartCluster(t, 3, 1).Client(t)
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		s, _ := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient, WaitReplicas: 1, WaitTimeout: patient / 4})
		return s
	})
}

// The conformance suite against a primary and a replica behind three
// sentinels, through go-redis's failover client, waiting for the replica
// on every Reserve and Complete.
func TestIdempotencyStoreConformanceOnSentinel(t *testing.T) {
	rdb := redistest.StartSentinel(t).Client(t)
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		s, _ := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient, WaitReplicas: 1, WaitTimeout: patient / 4})
		return s
	})
}

// Keys spread over every master of a Cluster: 300 keys reserved and
// completed leave records on each of the three masters, none with a
// CROSSSLOT error, and each key's records and nonces in one slot.
func TestIdempotencyStoreSpreadsOverClusterMasters(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartCluster(t, 3, 0)
	rdb := c.Client(t)
	s, prefix := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient})
	const keys = 300
	for i := range keys {
		key := fmt.Sprint("order-", i)
		r, err := s.Reserve(ctx, key, "fp", time.Minute)
		if err != nil || r.State != idempotency.StateReserved {
			t.Fatalf("Reserve %s = %+v, %v; want reserved", key, r, err)
		}
		if err := s.Complete(ctx, key, r.Token, &idempotency.Response{Status: 201}, time.Minute); err != nil {
			t.Fatalf("Complete %s: %v", key, err)
		}
	}
	masters, err := c.Masters()
	if err != nil || len(masters) != 3 {
		t.Fatalf("Masters = %d, %v; want 3", len(masters), err)
	}
	total := 0
	for i, m := range masters {
		records, err := m.Client(t).Keys(ctx, prefix+"{*}:r").Result()
		if err != nil {
			t.Fatal(err)
		}
		// About a third each; a master with under a sixth means the keys
		// do not spread.
		if len(records) < keys/6 {
			t.Errorf("master %d holds %d of %d records; want about a third", i, len(records), keys)
		}
		total += len(records)
	}
	if total != keys {
		t.Errorf("records on the masters = %d; want %d", total, keys)
	}
	// WaitReplicas sends its WAIT to the key's master: these have no
	// replica, so it counts none.
	waiting, _ := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient, WaitReplicas: 1, WaitTimeout: 20 * time.Millisecond})
	if _, err := waiting.Reserve(ctx, "order-0", "fp", time.Minute); !errors.Is(err, ErrNotReplicated) {
		t.Errorf("Reserve with WaitReplicas 1 on masters without replicas = %v; want ErrNotReplicated", err)
	}
}

// On a Cluster CheckEvictionPolicy reads the policy of every master, and
// Reserve that of its key's master: a key on a master configured to evict
// is refused, before anything is written. (A Reserve does not wait for the
// other masters: their policy does not touch its key, and one that hangs
// must not stall the keys of the others.)
func TestIdempotencyStoreChecksEvictionOnEveryClusterMaster(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartCluster(t, 3, 0)
	rdb := c.Client(t)
	masters, err := c.Masters()
	if err != nil {
		t.Fatal(err)
	}
	s, prefix := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient})
	if err := s.CheckEvictionPolicy(ctx); err != nil {
		t.Fatalf("CheckEvictionPolicy with every master at noeviction = %v; want nil", err)
	}
	for i := range masters {
		t.Run(fmt.Sprint("master_", i), func(t *testing.T) {
			m := masters[i].Client(t)
			if err := m.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
				t.Fatal(err)
			}
			defer m.ConfigSet(ctx, "maxmemory-policy", "noeviction")
			err := s.CheckEvictionPolicy(ctx)
			if !errors.Is(err, ErrEvictionPolicy) || !strings.Contains(err.Error(), "allkeys-lru") {
				t.Fatalf("CheckEvictionPolicy with master %d at allkeys-lru = %v; want ErrEvictionPolicy naming it", i, err)
			}
			fresh, freshPrefix := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient})
			key := keyOnMaster(t, c, rdb, freshPrefix, masters[i])
			if _, err := fresh.Reserve(ctx, key, "fp", time.Minute); !errors.Is(err, ErrEvictionPolicy) {
				t.Fatalf("Reserve of a key on master %d = %v; want ErrEvictionPolicy", i, err)
			}
		})
	}
	// Nothing was written by a refused Reserve.
	var n atomic.Int64 // ForEachMaster calls in parallel
	rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		n.Add(int64(len(m.Keys(ctx, prefix+"*").Val())))
		return nil
	})
	if n.Load() != 0 {
		t.Fatalf("%d keys under the first store's prefix; want 0", n.Load())
	}
}

// keyOnMaster returns an idempotency key whose records, under prefix,
// live on master.
func keyOnMaster(t *testing.T, c *redistest.Cluster, rdb *redis.ClusterClient, prefix string, master *redistest.Server) string {
	t.Helper()
	for i := range 1000 {
		key := fmt.Sprint("k", i)
		owner, err := c.Owner(int(rdb.ClusterKeySlot(context.Background(), recordKey(prefix, key)).Val()))
		if err != nil {
			t.Fatal(err)
		}
		if owner == master {
			return key
		}
	}
	t.Fatal("no key of 1000 lands on the master")
	return ""
}
