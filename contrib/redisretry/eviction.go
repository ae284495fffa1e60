package redisretry

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Every lock and record of an IdempotencyStore has a TTL, so under any
// maxmemory-policy but noeviction Redis may evict them when memory runs
// short: volatile-ttl evicts first the keys closest to expiry, which are
// the locks of running operations; volatile-lru/lfu/random pick among
// exactly these keys, and allkeys-* among them too. A lock or record
// evicted while its operation runs lets a retry reserve the key again and
// run the operation a second time (a second charge).
// Under noeviction a full Redis refuses new keys instead: Reserve fails
// with an error matching idempotency.ErrStoreFull, and the Handler answers
// 503 without running anything. Complete still records the response of an
// operation that ran (see completeScript).

// ErrEvictionPolicy is what an [IdempotencyStore] returns, wrapped with
// the policy it found, when its Redis is configured to evict keys: any
// maxmemory-policy but noeviction. Such a Redis may remove a running
// operation's lock or record under memory pressure, and a retry would
// then run the operation again.
var ErrEvictionPolicy = errors.New("redisretry: Redis may evict idempotency locks and records under memory pressure " +
	"(and a retry would then run the operation again); set maxmemory-policy noeviction")

// policyRecheck is how long a store trusts a noeviction verdict before
// asking again: the policy can be changed at run time (CONFIG SET), or a
// failover can bring a server configured otherwise.
const policyRecheck = time.Minute

// CheckEvictionPolicy asks Redis for its maxmemory-policy (CONFIG GET
// maxmemory-policy or, where CONFIG is disabled, INFO memory; on Redis
// Cluster, every master) and returns nil when it is noeviction, an error
// wrapping [ErrEvictionPolicy] when it is anything else, and another error
// when Redis does not answer or tells neither way. The store makes this
// check itself on the server of each Reserve's key (on a Cluster, the
// key's master) before its first Reserve there and then at most once a
// minute; call it at start-up to fail there rather than on the first
// request. With [IdempotencyOptions.AllowEviction] the store skips it,
// but CheckEvictionPolicy still reports.
func (s *IdempotencyStore) CheckEvictionPolicy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout())
	defer cancel()
	const op = "eviction policy check"
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return s.checkServer(ctx, c, c.Options().Addr, op)
		})
	}
	return s.checkServer(ctx, s.rdb, "", op)
}

// checkServer reads the maxmemory-policy of the server c at addr, judges
// it and remembers the verdict; op names the operation in an error of
// Redis.
func (s *IdempotencyStore) checkServer(ctx context.Context, c redis.Cmdable, addr, op string) error {
	policy, err := readPolicy(ctx, c)
	if err != nil {
		err = wrapStoreErr(op, err)
	} else {
		err = judgePolicy(policy)
	}
	s.verdicts.record(addr, time.Now(), err)
	return err
}

// checkEvictionPolicy makes the check Reserve of key needs: none with
// AllowEviction, and otherwise one of the server that holds key (on a
// Cluster, the key's master) unless a check of it passed within
// policyRecheck. A Reserve thus waits for no other master: one that hangs
// stalls only the keys it holds.
func (s *IdempotencyStore) checkEvictionPolicy(ctx context.Context, key string) error {
	if s.opts.AllowEviction {
		return nil
	}
	var c redis.Cmdable = s.rdb
	addr := ""
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		node, err := cc.MasterForKey(ctx, s.keyBase(key)+"r")
		if err != nil {
			return wrapStoreErr("reserve", err)
		}
		c, addr = node, node.Options().Addr
	}
	if s.verdicts.fresh(addr, time.Now()) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout())
	defer cancel()
	return s.checkServer(ctx, c, addr, "reserve")
}

// maxVerdicts bounds the servers remembered: more than any Cluster has
// masters. Past it (addresses come and go with failovers over a long
// life) the store forgets them all and checks each again.
const maxVerdicts = 1024

// verdicts remembers, per server address ("" for a store on one server
// or on Sentinel), when a check last found noeviction.
type verdicts struct {
	mu sync.Mutex
	ok map[string]time.Time
}

// fresh reports whether a check of addr passed within policyRecheck
// of now.
func (v *verdicts) fresh(addr string, now time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return policyFresh(v.ok[addr], now)
}

// record remembers the verdict err of a check of addr made at now.
func (v *verdicts) record(addr string, now time.Time, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch verdictOf(err) {
	case verdictPass:
		if v.ok == nil || len(v.ok) >= maxVerdicts {
			v.ok = map[string]time.Time{}
		}
		v.ok[addr] = now
	case verdictRefuse:
		delete(v.ok, addr)
	}
}

// policyFresh reports whether a noeviction verdict found at last (zero:
// never) still stands at now.
func policyFresh(last, now time.Time) bool {
	return !last.IsZero() && now.Sub(last) < policyRecheck
}

// verdict is what a check's outcome does to what the store remembers.
type verdict int

const (
	verdictKeep   verdict = iota // no answer: the last verdict stands, to expire in its time
	verdictPass                  // noeviction: trusted for policyRecheck
	verdictRefuse                // another policy: forgotten, every Reserve checks again
)

// verdictOf says what a check that returned err does to the verdict.
func verdictOf(err error) verdict {
	switch {
	case err == nil:
		return verdictPass
	case errors.Is(err, ErrEvictionPolicy):
		return verdictRefuse
	}
	return verdictKeep
}

// readPolicy reads maxmemory-policy with CONFIG GET, and from INFO memory
// when CONFIG is disabled (renamed away, as managed services often do).
func readPolicy(ctx context.Context, c redis.Cmdable) (string, error) {
	m, cfgErr := c.ConfigGet(ctx, "maxmemory-policy").Result()
	if p := m["maxmemory-policy"]; cfgErr == nil && p != "" {
		return p, nil
	}
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		var refused redis.Error
		if errors.As(err, &refused) {
			// Redis answered, and refused both (ACLs, renamed commands).
			return "", fmt.Errorf("cannot read maxmemory-policy (CONFIG GET: %v; INFO memory: %w); "+
				"allow one of them, or set IdempotencyOptions.AllowEviction", cfgErr, err)
		}
		return "", err
	}
	if p, ok := policyFromInfo(info); ok {
		return p, nil
	}
	return "", errors.New("neither CONFIG GET maxmemory-policy nor INFO memory names the policy; " +
		"set IdempotencyOptions.AllowEviction if your Redis cannot tell")
}

// policyFromInfo finds maxmemory_policy in the text of INFO memory.
func policyFromInfo(info string) (string, bool) {
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "maxmemory_policy:"); ok && v != "" {
			return v, true
		}
	}
	return "", false
}

// judgePolicy returns nil for noeviction and an error wrapping
// ErrEvictionPolicy, naming the policy, for any other.
func judgePolicy(policy string) error {
	if policy == "noeviction" {
		return nil
	}
	return fmt.Errorf("%w (it is %s), or set IdempotencyOptions.AllowEviction to accept the risk", ErrEvictionPolicy, policy)
}
