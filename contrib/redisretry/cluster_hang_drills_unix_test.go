//go:build drills && unix

package redisretry

import (
	"context"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/httpretry/httpretry/idempotency"
)

// Expected: Reserve of a key whose master answers succeeds while another master hangs.
func TestDrillReserveOnAHealthyMasterWorksWhileAnotherMasterHangs(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartCluster(t, 3, 0, "--cluster-node-timeout", "60000")
	rdb := c.Client(t)
	s, prefix := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: 5 * time.Second})
	owner, err := c.Owner(int(rdb.ClusterKeySlot(ctx, recordKey(prefix, "order-1")).Val()))
	if err != nil {
		t.Fatal(err)
	}
	masters, err := c.Masters()
	if err != nil {
		t.Fatal(err)
	}
	other := masters[0]
	if other == owner {
		other = masters[1]
	}
	other.Freeze()
	r, err := s.Reserve(ctx, "order-1", "fp", time.Minute)
	other.Thaw()
	if err != nil || r.State != idempotency.StateReserved {
		t.Fatalf("Reserve of a key whose master answers, another master hung = %+v, %v; want reserved", r, err)
	}
}
