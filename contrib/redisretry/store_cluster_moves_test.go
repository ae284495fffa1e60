package redisretry

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/httpretry/httpretry/idempotency"
	"github.com/redis/go-redis/v9"
)

// slotMove is a slot migration held open half-way, the way `redis-cli
// --cluster reshard` leaves it while it moves a slot's keys: IMPORTING on
// the new owner, MIGRATING on the old one, the keys moved, the slot not
// yet handed over.
type slotMove struct {
	slot     int
	from, to *redistest.Server
	masters  []*redistest.Server
	ids      map[*redistest.Server]string
}

// startSlotMove moves every key of slot to another master and stops
// before the hand-over.
func startSlotMove(t *testing.T, c *redistest.Cluster, slot int) *slotMove {
	t.Helper()
	ctx := context.Background()
	masters, err := c.Masters()
	if err != nil {
		t.Fatal(err)
	}
	from, err := c.Owner(slot)
	if err != nil {
		t.Fatal(err)
	}
	m := &slotMove{slot: slot, from: from, masters: masters, ids: map[*redistest.Server]string{}}
	for _, s := range masters {
		m.ids[s] = s.Client(t).ClusterMyID(ctx).Val()
		if s != from && m.to == nil {
			m.to = s
		}
	}
	sl := strconv.Itoa(slot)
	must(t, m.to.Client(t).Do(ctx, "cluster", "setslot", sl, "importing", m.ids[from]).Err())
	must(t, from.Client(t).Do(ctx, "cluster", "setslot", sl, "migrating", m.ids[m.to]).Err())
	src := from.Client(t)
	host, port, _ := strings.Cut(m.to.Addr(), ":")
	for {
		keys := src.ClusterGetKeysInSlot(ctx, slot, 100).Val()
		if len(keys) == 0 {
			break
		}
		args := []any{"migrate", host, port, "", 0, 5000, "keys"}
		for _, k := range keys {
			args = append(args, k)
		}
		must(t, src.Do(ctx, args...).Err())
	}
	return m
}

// finish hands the slot over to its new owner on every master.
func (m *slotMove) finish(t *testing.T) error {
	ctx := context.Background()
	sl := strconv.Itoa(m.slot)
	order := []*redistest.Server{m.to}
	for _, s := range m.masters {
		if s != m.to {
			order = append(order, s)
		}
	}
	for _, s := range order {
		rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
		err := rdb.Do(ctx, "cluster", "setslot", sl, "node", m.ids[m.to]).Err()
		rdb.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Expected: a Complete landing while its key's slot migrates records the response within CallTimeout.
func TestCompleteDuringSlotMigrationRecordsTheResponse(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartCluster(t, 3, 0)
	rdb := c.Client(t)
	s, prefix := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient})
	r, err := s.Reserve(ctx, "order-1", "fp", time.Minute)
	if err != nil || r.State != idempotency.StateReserved {
		t.Fatalf("Reserve = %+v, %v; want reserved", r, err)
	}
	slot := int(rdb.ClusterKeySlot(ctx, recordKey(prefix, "order-1")).Val())
	move := startSlotMove(t, c, slot)
	finished := make(chan error, 1)
	go func() {
		// The hand-over comes long after any retry of a failing call.
		time.Sleep(5 * time.Second)
		finished <- move.finish(t)
	}()
	err = s.Complete(ctx, "order-1", r.Token, &idempotency.Response{Status: 201, Body: []byte("charged")}, time.Minute)
	if ferr := <-finished; ferr != nil {
		t.Fatal(ferr)
	}
	if err != nil {
		t.Fatalf("Complete while the key's slot migrates = %v; want nil (the response recorded once the slot is stable, within CallTimeout)", err)
	}
	if r, err := s.Reserve(ctx, "order-1", "fp", time.Minute); err != nil || r.State != idempotency.StateCompleted {
		t.Fatalf("retry after the migration = %+v, %v; want the response replayed", r, err)
	}
}

// Expected: with WaitReplicas, a Complete after its key's slot moved follows MOVED and records the response.
func TestCompleteWithWaitReplicasFollowsAMovedSlot(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartCluster(t, 3, 1)
	opts := c.ClusterOptions()
	opts.ClusterStateReloadInterval = 0 // go-redis's default, 60 s
	rdb := redis.NewClusterClient(opts)
	t.Cleanup(func() { rdb.Close() })
	s, prefix := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient, WaitReplicas: 1, WaitTimeout: patient / 4})
	r, err := s.Reserve(ctx, "order-1", "fp", time.Minute)
	if err != nil || r.State != idempotency.StateReserved {
		t.Fatalf("Reserve = %+v, %v; want reserved", r, err)
	}
	slot := int(rdb.ClusterKeySlot(ctx, recordKey(prefix, "order-1")).Val())
	from, err := c.Owner(slot)
	must(t, err)
	masters, err := c.Masters()
	must(t, err)
	to := masters[0]
	if to == from {
		to = masters[1]
	}
	must(t, c.MigrateSlot(slot, to))
	err = s.Complete(ctx, "order-1", r.Token, &idempotency.Response{Status: 201, Body: []byte("charged")}, time.Minute)
	if err != nil {
		t.Fatalf("Complete after the key's slot moved = %v; want nil (recorded on the slot's new master and its replica)", err)
	}
	if r, err := s.Reserve(ctx, "order-1", "fp", time.Minute); err != nil || r.State != idempotency.StateCompleted {
		t.Fatalf("retry after the Complete = %+v, %v; want the response replayed", r, err)
	}
}

// lossyClusterClient returns a client of c whose connections to the
// master of key's slot pass through a proxy that can lose replies.
func lossyClusterClient(t *testing.T, c *redistest.Cluster, slotKey string) (*redis.ClusterClient, *redistest.Proxy) {
	t.Helper()
	plain := c.Client(t)
	slot := int(plain.ClusterKeySlot(context.Background(), slotKey).Val())
	owner, err := c.Owner(slot)
	must(t, err)
	proxy := redistest.StartProxy(t, owner.Addr())
	opts := c.ClusterOptions()
	opts.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == owner.Addr() {
			addr = proxy.Addr()
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	rdb := redis.NewClusterClient(opts)
	t.Cleanup(func() { rdb.Close() })
	return rdb, proxy
}

// Expected: on a Cluster with WaitReplicas, a Reserve whose reply was lost answers the caller's own reservation.
func TestLostReplyReserveOnClusterWithWaitReplicasAnswersTheReservation(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartCluster(t, 3, 1)
	prefix := uniquePrefix(t)
	rdb, proxy := lossyClusterClient(t, c, recordKey(prefix, "order-1"))
	s, err := NewIdempotencyStore(rdb, prefix, IdempotencyOptions{CallTimeout: patient, WaitReplicas: 1, WaitTimeout: patient / 4})
	must(t, err)
	must(t, reserveScript.Load(ctx, rdb).Err())

	proxy.LoseNext("evalsha", 1)
	r, err := s.Reserve(ctx, "order-1", "fp", time.Minute)
	if proxy.Lost() != 1 {
		t.Fatalf("the proxy lost %d replies; want 1", proxy.Lost())
	}
	if err != nil || r.State != idempotency.StateReserved {
		again, _ := s.Reserve(ctx, "order-1", "fp", time.Minute)
		t.Fatalf("Reserve whose first reply was lost = %+v, %v; want reserved (a retry now meets %v until the lock expires)", r, err, again.State)
	}
}
