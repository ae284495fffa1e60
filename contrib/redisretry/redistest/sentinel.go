package redistest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// sentinelBinary is the Sentinel program.
const sentinelBinary = "redis-sentinel"

// MasterName is the name under which the sentinels of a [Sentinel]
// monitor the primary.
const MasterName = "primary"

// Sentinel timing, in milliseconds: a primary that does not answer for
// SentinelDownAfter is down, and a failover that does not finish within
// sentinelFailoverTimeout is tried again. Low, so that drills fail over
// in seconds, yet not so low that a busy machine fails over by itself.
const (
	SentinelDownAfter       = 1000
	sentinelFailoverTimeout = 3000
)

// Sentinel is a primary redis-server, its replicas (one, or as many as
// [NewSentinelReplicas] is given), and three redis-sentinel processes
// that monitor it under [MasterName] with a quorum of two, all on
// 127.0.0.1. Replication is asynchronous: a write the primary
// acknowledged may not have reached a replica when it is promoted. Its
// methods are safe for concurrent use, but a test should not fail over
// twice at once.
type Sentinel struct {
	data      []*Server // the primary as started, then its replicas
	sentinels []*Server
}

// StartSentinel starts a Sentinel set-up with one replica for tb and
// stops it when tb ends; it fails tb when it does not come up. args are
// more redis-server arguments for the primary and the replica.
func StartSentinel(tb testing.TB, args ...string) *Sentinel {
	tb.Helper()
	return StartSentinelReplicas(tb, 1, args...)
}

// StartSentinelReplicas starts a Sentinel set-up with the given number of
// replicas for tb, as [NewSentinelReplicas] does, and stops it when tb
// ends; it fails tb when it does not come up.
func StartSentinelReplicas(tb testing.TB, replicas int, args ...string) *Sentinel {
	tb.Helper()
	s, err := NewSentinelReplicas(replicas, args...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// NewSentinel starts a primary, one replica of it and three sentinels,
// as [NewSentinelReplicas] does. The caller must Close it.
func NewSentinel(args ...string) (*Sentinel, error) { return NewSentinelReplicas(1, args...) }

// NewSentinelReplicas starts a primary, replicas replicas of it
// (--replicaof) and three sentinels, and waits until every replica is in
// sync and every sentinel knows every replica and the two other
// sentinels. args are more redis-server arguments for every data server.
// The caller must Close it.
func NewSentinelReplicas(replicas int, args ...string) (*Sentinel, error) {
	if replicas < 1 {
		return nil, fmt.Errorf("redistest: a Sentinel set-up with %d replicas: want at least 1", replicas)
	}
	for _, p := range []string{Binary, sentinelBinary} {
		if err := lookPath(p); err != nil {
			return nil, err
		}
	}
	s := &Sentinel{}
	primary, err := newServer(Binary, false, "", args)
	if err != nil {
		return nil, err
	}
	s.data = append(s.data, primary)
	host, port, _ := strings.Cut(primary.Addr(), ":")
	for range replicas {
		replica, err := newServer(Binary, false, "", append([]string{"--replicaof", host, port}, args...))
		if err != nil {
			s.Close()
			return nil, err
		}
		s.data = append(s.data, replica)
	}
	conf := fmt.Sprintf("sentinel monitor %[1]s %[2]s %[3]s 2\n"+
		"sentinel down-after-milliseconds %[1]s %[4]d\n"+
		"sentinel failover-timeout %[1]s %[5]d\n"+
		"sentinel parallel-syncs %[1]s 1\n", MasterName, host, port, SentinelDownAfter, sentinelFailoverTimeout)
	for range 3 {
		sen, err := newServer(sentinelBinary, false, conf, nil)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.sentinels = append(s.sentinels, sen)
	}
	if err := s.wait(primary); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// SentinelAddrs returns the host:port of the three sentinels.
func (s *Sentinel) SentinelAddrs() []string {
	var addrs []string
	for _, sen := range s.sentinels {
		addrs = append(addrs, sen.Addr())
	}
	return addrs
}

// FailoverOptions returns go-redis options that find the primary through
// the sentinels. Tests that need other settings change the copy they
// get.
func (s *Sentinel) FailoverOptions() *redis.FailoverOptions {
	return &redis.FailoverOptions{MasterName: MasterName, SentinelAddrs: s.SentinelAddrs(), ContextTimeoutEnabled: true}
}

// Client returns a go-redis client of the primary, found through the
// sentinels, closed when tb ends.
func (s *Sentinel) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	rdb := redis.NewFailoverClient(s.FailoverOptions())
	tb.Cleanup(func() { rdb.Close() })
	return rdb
}

// Sentinels returns the three sentinel processes.
func (s *Sentinel) Sentinels() []*Server { return append([]*Server(nil), s.sentinels...) }

// Primary returns the data server the sentinels name as primary now.
func (s *Sentinel) Primary() (*Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addr, err := s.primaryAddr(ctx)
	if err != nil {
		return nil, err
	}
	for _, d := range s.data {
		if d.Addr() == addr {
			return d, nil
		}
	}
	return nil, fmt.Errorf("redistest: the sentinels name %s primary, none of this set-up", addr)
}

// Replica returns the first data server, in the order they were
// started, that is not the primary now: with one replica, the replica.
func (s *Sentinel) Replica() (*Server, error) {
	replicas, err := s.Replicas()
	if err != nil {
		return nil, err
	}
	return replicas[0], nil
}

// Replicas returns the data servers that are not the primary now, in the
// order they were started, running or not.
func (s *Sentinel) Replicas() ([]*Server, error) {
	p, err := s.Primary()
	if err != nil {
		return nil, err
	}
	var out []*Server
	for _, d := range s.data {
		if d != p {
			out = append(out, d)
		}
	}
	return out, nil
}

// primaryAddr returns the primary's address as the first running
// sentinel that answers names it.
func (s *Sentinel) primaryAddr(ctx context.Context) (string, error) {
	err := errors.New("no sentinel running")
	for _, sen := range s.sentinels {
		if !sen.running() {
			continue
		}
		var addr string
		if addr, err = sentinelPrimary(ctx, sen); err == nil {
			return addr, nil
		}
	}
	return "", fmt.Errorf("redistest: SENTINEL GET-MASTER-ADDR-BY-NAME: %w", err)
}

// sentinelPrimary asks one sentinel for the primary's address.
func sentinelPrimary(ctx context.Context, sen *Server) (string, error) {
	rdb := redis.NewSentinelClient(&redis.Options{Addr: sen.Addr(), MaxRetries: -1, DialTimeout: time.Second})
	defer rdb.Close()
	hp, err := rdb.GetMasterAddrByName(ctx, MasterName).Result()
	if err != nil {
		return "", err
	}
	if len(hp) != 2 {
		return "", fmt.Errorf("reply %q", hp)
	}
	return hp[0] + ":" + hp[1], nil
}

// Failover asks a sentinel to promote a replica (SENTINEL FAILOVER; the
// sentinels choose which) and waits until every running sentinel names
// it primary and every other running data server, the old primary
// included, replicates from it. Unlike CLUSTER FAILOVER it does not wait
// for the replica to catch up: writes the old primary acknowledged and
// had not sent yet are lost. The old primary stays master, taking
// writes, until the sentinels reconfigure it, and the other replicas
// replicate from it until then.
func (s *Sentinel) Failover() error {
	old, err := s.Primary()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	// A sentinel aborts a failover that finds no replica fit to promote
	// (one whose last INFO is too old, just after a previous failover),
	// and does not try again by itself: ask again until one happens.
	err = poll(ctx, func(ctx context.Context) error {
		if p, err := s.Primary(); err == nil && p != old {
			return nil // asking again would fail back over
		}
		if err := s.askFailover(ctx); err != nil {
			return err
		}
		return s.promotedWithin(old, sentinelFailoverTimeout*time.Millisecond)
	})
	if err != nil {
		return fmt.Errorf("redistest: SENTINEL FAILOVER: %w", err)
	}
	return s.waitNewPrimary(old)
}

// askFailover sends SENTINEL FAILOVER to the first running sentinel.
func (s *Sentinel) askFailover(ctx context.Context) error {
	for _, sen := range s.sentinels {
		if sen.running() {
			_, err := sen.do(ctx, "sentinel", "failover", MasterName)
			return err // INPROG or NOGOODSLAVE: try again
		}
	}
	return errors.New("no sentinel running")
}

// promotedWithin waits up to d for the sentinels to name a primary other
// than old.
func (s *Sentinel) promotedWithin(old *Server, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		if p, err := s.Primary(); err == nil && p != old {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the sentinels still name %s primary %v after SENTINEL FAILOVER", old.Addr(), d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitNewPrimary waits until the sentinels name a primary other than old,
// then until the set-up is ready with it.
func (s *Sentinel) waitNewPrimary(old *Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	var promoted *Server
	err := poll(ctx, func(context.Context) error {
		p, err := s.Primary()
		if err != nil {
			return err
		}
		if p == old {
			return fmt.Errorf("the sentinels still name %s primary", old.Addr())
		}
		promoted = p
		return nil
	})
	if err != nil {
		return fmt.Errorf("redistest: failover: %w", err)
	}
	return s.wait(promoted)
}

// KillPrimary kills the primary with SIGKILL, as a crash would, and
// waits until every running sentinel names a replica primary. It returns
// the killed server; [Server.Restart] brings it back empty, as a replica
// of the new primary.
func (s *Sentinel) KillPrimary() (*Server, error) {
	primary, err := s.Primary()
	if err != nil {
		return nil, err
	}
	primary.Kill()
	if err := s.waitNewPrimary(primary); err != nil {
		return primary, err
	}
	promoted, err := s.Primary()
	if err != nil {
		return primary, err
	}
	// Restarted empty as a master, it could hand its empty data set to
	// the replicas before the sentinels demote it (the hazard of a
	// primary without persistence): it comes back a replica instead, as
	// an operator would bring it back.
	primary.replicaOf(promoted)
	return primary, nil
}

// Wait waits until every running sentinel names the current primary, it
// says it is a master, the other data server, if it runs, is in sync
// with it, and every sentinel knows the two others.
func (s *Sentinel) Wait() error { return s.wait(nil) }

// wait waits until primary is the primary as Wait describes; a nil
// primary is whichever one the first sentinel to answer names at each
// try, since a sentinel may lag the others for a while.
func (s *Sentinel) wait(want *Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	err := poll(ctx, func(ctx context.Context) error {
		primary := want
		if primary == nil {
			p, err := s.Primary()
			if err != nil {
				return err
			}
			primary = p
		}
		for _, sen := range s.sentinels {
			if !sen.running() {
				continue
			}
			if err := sentinelReady(ctx, sen, primary.Addr(), len(s.data)-1, len(s.sentinels)-1); err != nil {
				return fmt.Errorf("sentinel %s: %w", sen.Addr(), err)
			}
		}
		if role, err := primary.do(ctx, "role"); err != nil || !strings.HasPrefix(role, "[master") {
			return fmt.Errorf("%s is not a master yet: ROLE %q, %v", primary.Addr(), role, err)
		}
		for _, d := range s.data {
			if d != primary && d.running() {
				if err := inSync(ctx, d, primary); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("redistest: Sentinel set-up not ready: %w", err)
	}
	return nil
}

// inSync says why replica does not yet replicate from primary with its
// link up, or nil.
func inSync(ctx context.Context, replica, primary *Server) error {
	repl, err := replica.do(ctx, "info", "replication")
	if err != nil {
		return err
	}
	if !strings.Contains(repl, "master_port:"+strconv.Itoa(primary.port)+"\r\n") ||
		!strings.Contains(repl, "master_link_status:up") {
		return fmt.Errorf("%s is not in sync with %s", replica.Addr(), primary.Addr())
	}
	return nil
}

// sentinelReady says why sen does not yet name primary, or does not know
// replicas replicas and others other sentinels, or nil.
func sentinelReady(ctx context.Context, sen *Server, primary string, replicas, others int) error {
	addr, err := sentinelPrimary(ctx, sen)
	if err != nil {
		return err
	}
	if addr != primary {
		return fmt.Errorf("names %s primary, not %s", addr, primary)
	}
	rdb := redis.NewSentinelClient(&redis.Options{Addr: sen.Addr(), MaxRetries: -1, DialTimeout: time.Second})
	defer rdb.Close()
	m, err := rdb.Master(ctx, MasterName).Result()
	if err != nil {
		return err
	}
	// Sentinels learn replicas from the primary's INFO, every ten
	// seconds; one that knows none cannot fail over. A replica that is
	// down (a killed primary not yet back) still counts.
	if m["num-slaves"] != strconv.Itoa(replicas) {
		return fmt.Errorf("knows %s replicas, not %d", m["num-slaves"], replicas)
	}
	if m["num-other-sentinels"] != strconv.Itoa(others) {
		return fmt.Errorf("knows %s other sentinels, not %d", m["num-other-sentinels"], others)
	}
	if strings.Contains(m["flags"], "down") || strings.Contains(m["flags"], "failover") {
		return fmt.Errorf("flags %s", m["flags"])
	}
	return nil
}

// Close stops every process and removes their directories.
func (s *Sentinel) Close() error {
	var errs []error
	for _, sen := range s.sentinels {
		errs = append(errs, sen.Close())
	}
	for _, d := range s.data {
		errs = append(errs, d.Close())
	}
	return errors.Join(errs...)
}
