package redisretry

import (
	"context"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
)

// Expected: after the bucket's slot moves to another master, the fleet still hears the announced refusals.
func TestRefusalAnnouncedAfterTheBucketSlotMigrates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cl := redistest.StartCluster(t, 3, 0)
	a, b := cl.Client(t), cl.Client(t)
	o := Options{FleetSize: 1, RefusalMemory: time.Minute, FlushInterval: time.Hour, CallTimeout: patient}
	first := newBudget(t, a, "migrate-announce", 2, 0, o)
	other := newBudget(t, b, "migrate-announce", 2, 0, o)
	eventually(t, "both subscribed", func() bool {
		got, err := a.PubSubShardNumSub(ctx, first.announce).Result()
		return err == nil && got[first.announce] == 2
	})
	slot, err := a.ClusterKeySlot(ctx, first.announce).Result()
	if err != nil {
		t.Fatal(err)
	}
	from, err := cl.Owner(int(slot))
	if err != nil {
		t.Fatal(err)
	}
	masters, err := cl.Masters()
	if err != nil {
		t.Fatal(err)
	}
	to := masters[0]
	if to == from {
		to = masters[1]
	}
	if err := cl.MigrateSlot(int(slot), to); err != nil {
		t.Fatal(err)
	}
	// Resubscribing takes a round trip or two after the old owner ends
	// the subscriptions (a client whose map of the Cluster is stale is
	// first answered MOVED); an announcement made before that is missed,
	// which the README allows (it costs one more call). So the refusal is
	// made once both listen on the new owner, which they never do unless
	// the Budget subscribes again.
	toClient := to.Client(t)
	eventually(t, "both subscribed on the new owner", func() bool {
		got, err := toClient.PubSubShardNumSub(ctx, first.announce).Result()
		return err == nil && got[first.announce] == 2
	})
	if n := drain(t, first); n != 2 {
		t.Fatalf("drained %d; want 2", n)
	}
	deadline := time.Now().Add(20 * time.Second)
	for other.heard.Load() != 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := other.heard.Load(); got != 1 {
		subs, err := a.PubSubShardNumSub(ctx, first.announce).Result()
		t.Errorf("after the slot moved, the other process heard %d announcements in 20s; want 1 (subscribers on the new owner: %v, %v)",
			got, subs[first.announce], err)
	}
}
