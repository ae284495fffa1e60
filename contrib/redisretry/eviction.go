package redisretry

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
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
// check itself before its first Reserve and then at most once a minute;
// call it at start-up to fail there rather than on the first request.
// With [IdempotencyOptions.AllowEviction] the store skips it, but
// CheckEvictionPolicy still reports.
func (s *IdempotencyStore) CheckEvictionPolicy(ctx context.Context) error {
	return s.checkPolicy(ctx, "eviction policy check")
}

// checkPolicy reads the maxmemory-policy of every server and judges it;
// op names the operation in an error of Redis.
func (s *IdempotencyStore) checkPolicy(ctx context.Context, op string) error {
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout())
	defer cancel()
	check := func(ctx context.Context, c redis.Cmdable) error {
		policy, err := readPolicy(ctx, c)
		if err != nil {
			return wrapStoreErr(op, err)
		}
		return judgePolicy(policy)
	}
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return check(ctx, c) })
	}
	return check(ctx, s.rdb)
}

// checkEvictionPolicy makes the check Reserve needs: none with
// AllowEviction, and none within policyRecheck of a passed one.
func (s *IdempotencyStore) checkEvictionPolicy(ctx context.Context) error {
	if s.opts.AllowEviction {
		return nil
	}
	now := time.Now().UnixNano()
	if last := s.policyOK.Load(); last != 0 && now-last < int64(policyRecheck) {
		return nil
	}
	if err := s.checkPolicy(ctx, "reserve"); err != nil {
		s.policyOK.Store(0)
		return err
	}
	s.policyOK.Store(now)
	return nil
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
