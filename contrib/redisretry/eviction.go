package redisretry

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"

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

// CheckEvictionPolicy asks Redis for its maxmemory-policy (CONFIG GET
// maxmemory-policy or, where CONFIG is disabled, INFO memory; on Redis
// Cluster, every master) and returns nil when it is noeviction, an error
// wrapping [ErrEvictionPolicy] when it is anything else, and another error
// when Redis does not answer or tells neither way. The store does not
// need it: every Reserve's script reads the policy of the server that
// runs it (see policyCheck) and reserves nothing on one that evicts. Call
// it at start-up to fail there rather than on the first request. With
// [IdempotencyOptions.AllowEviction] the store skips its own check, but
// CheckEvictionPolicy still reports.
func (s *IdempotencyStore) CheckEvictionPolicy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout())
	defer cancel()
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return checkServer(ctx, c)
		})
	}
	return checkServer(ctx, s.rdb)
}

// checkServer reads the maxmemory-policy of the server c and judges it.
func checkServer(ctx context.Context, c redis.Cmdable) error {
	policy, err := readPolicy(ctx, c)
	if err != nil {
		return wrapStoreErr("eviction policy check", err)
	}
	return judgePolicy(policy)
}

// A check made before a Reserve, from the client, cannot tell which
// server will run the Reserve: after a Sentinel failover the client
// writes to the promoted replica, and on a Cluster the slot map it
// routes by may be older than a failover. So the reserve script makes the
// check itself, on the server that runs it and before it writes: it
// reads maxmemory_policy from INFO memory (CONFIG cannot run in a
// script) and answers {5, policy} for any policy but noeviction, or
// {5, ""} when INFO is refused or does not name one. The cost is one INFO
// memory per Reserve, run inside Redis, with no round trip.

// policyCheck is the reserve script's argument that turns its policy
// check on ("1") or off ("0", with AllowEviction).
func (s *IdempotencyStore) policyCheck() string {
	if s.opts.AllowEviction {
		return "0"
	}
	return "1"
}

// errPolicyUnread is the refusal of a reserve script that could not read
// the policy: INFO is refused (renamed, or denied by an ACL) or does not
// name one.
var errPolicyUnread = errors.New("redisretry: idempotency reserve: cannot read maxmemory-policy " +
	"(INFO memory, run by the reserve script, is refused or does not name it); " +
	"allow INFO, or set IdempotencyOptions.AllowEviction")

// policyRefusal is the error of a reserve script's {5, policy} answer.
func policyRefusal(policy string) error {
	if policy == "" {
		return errPolicyUnread
	}
	return fmt.Errorf("redisretry: idempotency reserve: %w", judgePolicy(policy))
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
