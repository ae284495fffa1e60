//go:build drills

// Tests of the harness that wait for failovers: they run with the drills
// (make redis-drills), not in make test.

package redistest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Killing a master promotes its replica: the Cluster serves every slot
// again, the keys written before the kill and replicated are there, and
// the killed node restarts as a replica of its successor.
func TestClusterKillMasterPromotesReplica(t *testing.T) {
	ctx := context.Background()
	c := StartCluster(t, 3, 1)
	if got := len(c.Nodes()); got != 6 {
		t.Fatalf("Nodes = %d; want 6", got)
	}
	masters, err := c.Masters()
	if err != nil || len(masters) != 3 {
		t.Fatalf("Masters = %d, %v; want 3", len(masters), err)
	}
	replicas, err := c.Replicas(masters[0])
	if err != nil || len(replicas) != 1 {
		t.Fatalf("Replicas of master 0 = %d, %v; want 1", len(replicas), err)
	}
	rdb := c.Client(t)
	keys := keyPerMaster(t, ctx, c, rdb, masters)
	if err := rdb.Set(ctx, keys[0], "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// WAIT makes the write reach the replica before the kill.
	direct := masters[0].Client(t)
	if n, err := direct.Wait(ctx, 1, 5000).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT = %d, %v; want 1", n, err)
	}
	killed, err := c.KillMaster(0)
	if err != nil {
		t.Fatal(err)
	}
	if killed != masters[0] {
		t.Fatalf("KillMaster(0) killed %s; want %s", killed.Addr(), masters[0].Addr())
	}
	after, err := c.Masters()
	if err != nil || len(after) != 3 || after[0] != replicas[0] {
		t.Fatalf("Masters after the kill = %v, %v; want the replica %s first", addrs(after), err, replicas[0].Addr())
	}
	// The client learns of the new master after an error or two.
	if got, err := eventually(ctx, rdb, keys[0]); err != nil || got != "before" {
		t.Fatalf("GET after failover = %q, %v; want before", got, err)
	}
	killed.Restart(t)
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}
	back, err := c.Replicas(replicas[0])
	if err != nil || len(back) != 1 || back[0] != killed {
		t.Fatalf("Replicas of the new master = %v, %v; want the restarted node", addrs(back), err)
	}
	// A manual failover gives the slots back without losing the key.
	if err := c.Failover(killed); err != nil {
		t.Fatal(err)
	}
	if got, err := eventually(ctx, rdb, keys[0]); err != nil || got != "before" {
		t.Fatalf("GET after CLUSTER FAILOVER = %q, %v; want before", got, err)
	}
}

func addrs(servers []*Server) []string {
	var out []string
	for _, s := range servers {
		out = append(out, s.Addr())
	}
	return out
}

// eventually reads key until a read succeeds or 20 s pass.
func eventually(ctx context.Context, rdb *redis.ClusterClient, key string) (string, error) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		v, err := rdb.Get(ctx, key).Result()
		if err == nil || time.Now().After(deadline) {
			return v, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
