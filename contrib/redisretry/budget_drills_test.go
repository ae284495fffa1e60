//go:build drills

package redisretry_test

import (
	"context"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry/internal/budgetdrill"
	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
)

// Ten processes fail 50 operations a second each for 3 s on a drained
// bucket, on a Redis kept past its maxmemory by a writer, under each
// policy that evicts the budget's keys: the retries granted stay within
// capacity + 0.1 per operation. (An evicted bucket came back full, and a
// run granted several times the bound.)
func TestDrillBudgetBoundHoldsOnARedisThatEvicts(t *testing.T) {
	for _, policy := range []string{"volatile-ttl", "allkeys-lru", "noeviction"} {
		t.Run(policy, func(t *testing.T) {
			res, err := budgetdrill.Eviction(context.Background(), budgetdrill.EvictionConfig{
				Policy: policy, Processes: 10, Rate: 50, Duration: 3 * time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d failing operations, %d retries granted, bound %d, %d keys evicted, %d of 10 on the local bucket",
				policy, res.Ops, res.Granted, res.Bound, res.Evicted, res.Local)
			if res.Granted > res.Bound {
				t.Errorf("granted %d retries for %d operations; want at most %d", res.Granted, res.Ops, res.Bound)
			}
			if res.Ops == 0 {
				t.Error("no operation ran")
			}
		})
	}
}

// A Cluster master is killed under a Budget with default Options on a
// client with go-redis's default ClusterOptions (its slot map reloaded
// only every minute): the Budget falls back to its local bucket, and is
// back on the shared bucket within 15 s of the replica taking over.
func TestDrillBudgetBackOnSharedBucketWithin15sOfClusterFailover(t *testing.T) {
	c := redistest.StartCluster(t, 3, 1)
	res, err := budgetdrill.ClusterFailover(context.Background(), c, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("back on the shared bucket %v after the replica took over", res.BackAfter)
	if !res.WentLocal {
		t.Error("the Budget never fell back to its local bucket while the master was dead")
	}
}
