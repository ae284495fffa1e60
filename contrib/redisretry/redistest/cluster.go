package redistest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// cliBinary is the program that creates a Cluster from its nodes.
const cliBinary = "redis-cli"

// clusterTimeout bounds how long a Cluster may take to form, to fail
// over, or to move a slot.
const clusterTimeout = 60 * time.Second

// ClusterNodeTimeout is the cluster-node-timeout of the nodes a Cluster
// starts, in milliseconds: how long a master may not answer before its
// replicas take over. Low, so that drills fail over in seconds; an
// argument "--cluster-node-timeout" given to [NewCluster] replaces it.
const ClusterNodeTimeout = 2000

// Cluster is a Redis Cluster of redis-server processes on 127.0.0.1:
// masters that share the 16384 slots, each with its replicas. Nodes keep
// no data on disk, only their Cluster identity, so a killed node that
// restarts ([Server.Restart]) rejoins empty. Its methods are safe for
// concurrent use, but a test should not kill or fail over two nodes at
// once.
type Cluster struct {
	nodes []*Server
}

// StartCluster starts a Cluster for tb and stops it when tb ends; it
// fails tb when the Cluster does not form.
func StartCluster(tb testing.TB, masters, replicasPerMaster int, args ...string) *Cluster {
	tb.Helper()
	c, err := NewCluster(masters, replicasPerMaster, args...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// NewCluster starts masters*(1+replicasPerMaster) nodes with more
// redis-server arguments args, joins them with `redis-cli --cluster
// create`, and waits until every node sees every slot served and every
// replica in sync. masters must be at least 3, as Redis Cluster requires.
// The caller must Close it.
func NewCluster(masters, replicasPerMaster int, args ...string) (*Cluster, error) {
	if masters < 3 || replicasPerMaster < 0 {
		return nil, fmt.Errorf("redistest: a Cluster of %d masters with %d replicas each: want at least 3 masters", masters, replicasPerMaster)
	}
	for _, p := range []string{Binary, cliBinary} {
		if err := lookPath(p); err != nil {
			return nil, err
		}
	}
	nodeArgs := append([]string{
		"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", strconv.Itoa(ClusterNodeTimeout),
		// A replica takes over however long it was cut off from its
		// master: the nodes keep no data, so no replica is staler than
		// an empty restarted master.
		"--cluster-replica-validity-factor", "0",
		// Every master keeps the replicas it was created with: a replica
		// just promoted has none attached for a moment, and Redis would
		// otherwise move a replica of another master to it, leaving
		// masters with uneven counts of replicas.
		"--cluster-migration-barrier", "999"}, args...)
	c := &Cluster{}
	for range masters * (1 + replicasPerMaster) {
		s, err := newServer(Binary, true, "", nodeArgs)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.nodes = append(c.nodes, s)
	}
	if err := c.create(replicasPerMaster); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.Wait(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// create runs redis-cli --cluster create over the nodes.
func (c *Cluster) create(replicas int) error {
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	out, err := exec.CommandContext(ctx, cliBinary, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("redistest: %s --cluster create: %w; its output:\n%s", cliBinary, err, out)
	}
	return nil
}

// Addrs returns the host:port of every node, running or not, in the
// order they were started.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Nodes returns every node, running or not, in the order they were
// started.
func (c *Cluster) Nodes() []*Server { return slices.Clone(c.nodes) }

// ClusterOptions returns go-redis options that reach the Cluster. Tests
// that need other settings change the copy they get.
//
// The client reloads the Cluster's layout every second: go-redis sends a
// dead master's slots to it, failing, until its layout is reloaded after
// ClusterStateReloadInterval (60 s by default), not when a connection is
// refused, so drills that kill a master would otherwise wait a minute.
func (c *Cluster) ClusterOptions() *redis.ClusterOptions {
	return &redis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true, ClusterStateReloadInterval: time.Second}
}

// Client returns a go-redis client of the Cluster, closed when tb ends.
func (c *Cluster) Client(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	rdb := redis.NewClusterClient(c.ClusterOptions())
	tb.Cleanup(func() { rdb.Close() })
	return rdb
}

// Close stops every node and removes their directories.
func (c *Cluster) Close() error {
	var errs []error
	for _, s := range c.nodes {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// node is what a running node says of itself in CLUSTER NODES.
type node struct {
	srv       *Server
	id        string
	master    bool
	masterID  string // of a replica
	firstSlot int    // of a master; -1 when it serves none
}

// parseMyself reads the line flagged "myself" of a CLUSTER NODES reply:
// "<id> <ip:port@bus> <flags> <master-id|-> <ping> <pong> <epoch>
// <link> <slot>...".
func parseMyself(reply string) (node, error) {
	for line := range strings.Lines(reply) {
		f := strings.Fields(line)
		if len(f) < 8 || !slices.Contains(strings.Split(f[2], ","), "myself") {
			continue
		}
		n := node{id: f[0], firstSlot: -1}
		n.master = slices.Contains(strings.Split(f[2], ","), "master")
		if f[3] != "-" {
			n.masterID = f[3]
		}
		if len(f) > 8 && !strings.HasPrefix(f[8], "[") {
			first, _, _ := strings.Cut(f[8], "-")
			if v, err := strconv.Atoi(first); err == nil {
				n.firstSlot = v
			}
		}
		return n, nil
	}
	return node{}, errors.New("redistest: no line flagged myself in CLUSTER NODES")
}

// running returns what each running node says of itself.
func (c *Cluster) running(ctx context.Context) ([]node, error) {
	var nodes []node
	for _, s := range c.nodes {
		if !s.running() {
			continue
		}
		reply, err := s.do(ctx, "cluster", "nodes")
		if err != nil {
			return nil, err
		}
		n, err := parseMyself(reply)
		if err != nil {
			return nil, err
		}
		n.srv = s
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// Masters returns the running masters that serve slots, in the order of
// the first slot each serves, as they say of themselves: after a
// failover, a promoted replica takes its old master's place.
func (c *Cluster) Masters() ([]*Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nodes, err := c.running(ctx)
	if err != nil {
		return nil, err
	}
	nodes = slices.DeleteFunc(nodes, func(n node) bool { return !n.master || n.firstSlot < 0 })
	slices.SortFunc(nodes, func(a, b node) int { return a.firstSlot - b.firstSlot })
	var out []*Server
	for _, n := range nodes {
		out = append(out, n.srv)
	}
	return out, nil
}

// Replicas returns the running replicas of master.
func (c *Cluster) Replicas(master *Server) ([]*Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nodes, err := c.running(ctx)
	if err != nil {
		return nil, err
	}
	id := ""
	for _, n := range nodes {
		if n.srv == master {
			id = n.id
		}
	}
	var out []*Server
	for _, n := range nodes {
		if !n.master && id != "" && n.masterID == id {
			out = append(out, n.srv)
		}
	}
	return out, nil
}

// KillMaster kills the i-th of [Cluster.Masters] with SIGKILL, as a crash
// would, and waits until one of its replicas has taken over its slots
// and every running node sees every slot served again. It returns the
// killed node, which [Server.Restart] brings back as a replica.
func (c *Cluster) KillMaster(i int) (*Server, error) {
	masters, err := c.Masters()
	if err != nil {
		return nil, err
	}
	if i < 0 || i >= len(masters) {
		return nil, fmt.Errorf("redistest: KillMaster(%d) of %d masters", i, len(masters))
	}
	victim := masters[i]
	replicas, err := c.Replicas(victim)
	if err != nil {
		return nil, err
	}
	if len(replicas) == 0 {
		return nil, fmt.Errorf("redistest: master %s has no replica to take over", victim.Addr())
	}
	victim.Kill()
	return victim, c.waitPromoted(replicas)
}

// Failover asks replica to take its master's place with CLUSTER FAILOVER,
// which waits for it to catch up first, so no acknowledged write is
// lost; it returns once replica serves the slots and every running node
// sees every slot served.
func (c *Cluster) Failover(replica *Server) error { return c.failover(replica) }

// ForceFailover asks replica to take its master's place at once with
// CLUSTER FAILOVER FORCE, which does not wait for it to catch up nor for
// the master to agree: the old master takes writes until it learns of
// the new epoch, and its other replicas replicate from it until then, so
// writes it acknowledged may be lost. It returns once replica serves the
// slots and every running node sees every slot served.
func (c *Cluster) ForceFailover(replica *Server) error { return c.failover(replica, "force") }

// failover sends CLUSTER FAILOVER with mode to replica until it takes
// over: a manual failover that does not complete in time (the replica
// slow to catch up) is given up, and the other masters may deny their
// votes (one voted for this master's replicas within twice the node
// timeout, as just after the Cluster formed), and neither is tried
// again by the node itself. Then it waits until the Cluster is whole.
func (c *Cluster) failover(replica *Server, mode ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	cmd := append([]string{"cluster", "failover"}, mode...)
	err := poll(ctx, func(ctx context.Context) error {
		if promoted(ctx, replica) {
			return nil
		}
		if _, err := replica.do(ctx, cmd...); err != nil {
			return fmt.Errorf("%s on %s: %w", strings.ToUpper(strings.Join(cmd, " ")), replica.Addr(), err)
		}
		// Longer than a manual failover may take (5 s), so that one under
		// way is not started again.
		deadline := time.Now().Add(3 * ClusterNodeTimeout * time.Millisecond)
		for time.Now().Before(deadline) {
			if promoted(context.Background(), replica) {
				return nil
			}
			time.Sleep(50 * time.Millisecond)
		}
		return fmt.Errorf("%s has not taken over", replica.Addr())
	})
	if err != nil {
		return fmt.Errorf("redistest: failover: %w", err)
	}
	return c.waitPromoted([]*Server{replica})
}

// promoted says whether s says it is a master serving slots.
func promoted(ctx context.Context, s *Server) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	reply, err := s.do(ctx, "cluster", "nodes")
	if err != nil {
		return false
	}
	n, err := parseMyself(reply)
	return err == nil && n.master && n.firstSlot >= 0
}

// waitPromoted waits until one of candidates says it is a master serving
// slots, then until the Cluster is whole again.
func (c *Cluster) waitPromoted(candidates []*Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	err := poll(ctx, func(ctx context.Context) error {
		for _, s := range candidates {
			reply, err := s.do(ctx, "cluster", "nodes")
			if err != nil {
				continue
			}
			if n, err := parseMyself(reply); err == nil && n.master && n.firstSlot >= 0 {
				return nil
			}
		}
		return errors.New("no replica has taken over")
	})
	if err != nil {
		return fmt.Errorf("redistest: failover: %w", err)
	}
	return c.Wait()
}

// Wait waits until every running node says cluster_state:ok with all
// 16384 slots served, and every running replica is in sync with its
// master: after [NewCluster], a failover, or a [Server.Restart].
func (c *Cluster) Wait() error {
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	err := poll(ctx, func(ctx context.Context) error {
		for _, s := range c.nodes {
			if !s.running() {
				continue
			}
			if err := nodeReady(ctx, s); err != nil {
				return fmt.Errorf("%s: %w", s.Addr(), err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("redistest: Cluster not ready: %w", err)
	}
	return nil
}

// nodeReady says why s is not yet a ready Cluster node, or nil.
func nodeReady(ctx context.Context, s *Server) error {
	info, err := s.do(ctx, "cluster", "info")
	if err != nil {
		return err
	}
	for _, want := range []string{"cluster_state:ok", "cluster_slots_assigned:16384", "cluster_slots_ok:16384"} {
		if !strings.Contains(info, want+"\r\n") {
			return fmt.Errorf("CLUSTER INFO lacks %s", want)
		}
	}
	repl, err := s.do(ctx, "info", "replication")
	if err != nil {
		return err
	}
	if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
		return errors.New("replica not in sync with its master")
	}
	return nil
}

// MigrateSlot moves slot, with its keys, to the master to, the way
// `redis-cli --cluster reshard` does: IMPORTING on to, MIGRATING on the
// owner, MIGRATE of its keys in batches, then SETSLOT NODE on every
// master. During the move a client is redirected with ASK for keys
// already moved.
func (c *Cluster) MigrateSlot(slot int, to *Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	masters, err := c.Masters()
	if err != nil {
		return err
	}
	ids := map[*Server]string{}
	for _, m := range masters {
		if ids[m], err = m.do(ctx, "cluster", "myid"); err != nil {
			return err
		}
	}
	if ids[to] == "" {
		return fmt.Errorf("redistest: %s is not a master serving slots", to.Addr())
	}
	from, err := c.owner(ctx, slot, masters)
	if err != nil || from == to {
		return err
	}
	s := strconv.Itoa(slot)
	if _, err := to.do(ctx, "cluster", "setslot", s, "importing", ids[from]); err != nil {
		return fmt.Errorf("redistest: SETSLOT IMPORTING: %w", err)
	}
	if _, err := from.do(ctx, "cluster", "setslot", s, "migrating", ids[to]); err != nil {
		return fmt.Errorf("redistest: SETSLOT MIGRATING: %w", err)
	}
	if err := migrateKeys(ctx, from, to, slot); err != nil {
		return err
	}
	// The new owner first, so that it never redirects back to the old.
	for _, m := range append([]*Server{to}, slices.DeleteFunc(masters, func(m *Server) bool { return m == to })...) {
		if _, err := m.do(ctx, "cluster", "setslot", s, "node", ids[to]); err != nil {
			return fmt.Errorf("redistest: SETSLOT NODE on %s: %w", m.Addr(), err)
		}
	}
	return c.Wait()
}

// Owner returns the running master that says it serves slot.
func (c *Cluster) Owner(slot int) (*Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	masters, err := c.Masters()
	if err != nil {
		return nil, err
	}
	return c.owner(ctx, slot, masters)
}

// owner returns the master among masters that says it serves slot.
func (c *Cluster) owner(ctx context.Context, slot int, masters []*Server) (*Server, error) {
	for _, m := range masters {
		reply, err := m.do(ctx, "cluster", "nodes")
		if err != nil {
			return nil, err
		}
		if servesSlot(reply, slot) {
			return m, nil
		}
	}
	return nil, fmt.Errorf("redistest: no master serves slot %d", slot)
}

// servesSlot says whether the line flagged "myself" of a CLUSTER NODES
// reply lists slot among its slot ranges ("0-5460", "7000"); a slot being
// imported or migrated ("[7000->-id]") counts for neither side.
func servesSlot(reply string, slot int) bool {
	for line := range strings.Lines(reply) {
		f := strings.Fields(line)
		if len(f) < 9 || !slices.Contains(strings.Split(f[2], ","), "myself") {
			continue
		}
		for _, r := range f[8:] {
			lo, hi, found := strings.Cut(r, "-")
			if !found {
				hi = lo
			}
			l, err1 := strconv.Atoi(lo)
			h, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil && l <= slot && slot <= h {
				return true
			}
		}
	}
	return false
}

// migrateKeys moves every key of slot from one master to another.
func migrateKeys(ctx context.Context, from, to *Server, slot int) error {
	rdb := from.plainClient()
	defer rdb.Close()
	host, port, _ := strings.Cut(to.Addr(), ":")
	for {
		keys, err := rdb.ClusterGetKeysInSlot(ctx, slot, 100).Result()
		if err != nil {
			return fmt.Errorf("redistest: GETKEYSINSLOT: %w", err)
		}
		if len(keys) == 0 {
			return nil
		}
		args := []any{"migrate", host, port, "", 0, 5000, "keys"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := rdb.Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("redistest: MIGRATE: %w", err)
		}
	}
}

// poll calls check every 50ms until it returns nil or ctx ends; then it
// returns check's last error.
func poll(ctx context.Context, check func(context.Context) error) error {
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := check(cctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// plainClient returns a client of s alone, which never retries: the
// caller closes it.
func (s *Server) plainClient() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: time.Second, PoolSize: 1})
}

// do sends one command to s and returns its reply as a string.
func (s *Server) do(ctx context.Context, args ...string) (string, error) {
	rdb := s.plainClient()
	defer rdb.Close()
	a := make([]any, len(args))
	for i, v := range args {
		a[i] = v
	}
	v, err := rdb.Do(ctx, a...).Result()
	if err != nil {
		return "", err
	}
	switch v := v.(type) {
	case string:
		return v, nil
	case []byte:
		return string(bytes.Clone(v)), nil
	default:
		return fmt.Sprint(v), nil
	}
}

// running says whether s has been started and not killed since.
func (s *Server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}
