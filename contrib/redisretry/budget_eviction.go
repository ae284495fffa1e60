package redisretry

import (
	"errors"
	"strings"
	"time"
)

// Every key of a Budget has a TTL (the bucket's refreshed by every call,
// the nonces', the marker's), so under any maxmemory-policy but
// noeviction Redis may evict them when memory runs short: volatile-ttl
// evicts first the keys closest to expiry, volatile-lru/lfu/random pick
// among keys with a TTL, and allkeys-* among every key. An evicted bucket
// comes back full at the next call (a missing key is a full bucket, as a
// new TokenBucket is), so a fleet on a drained bucket would be granted a
// capacity of retries at every eviction, without bound; an evicted nonce
// lets a call go-redis sent twice apply twice.
//
// So the script checks the server that runs it before it touches
// anything. It reads the server's run_id (INFO server, as cheap as a GET)
// and compares it with a marker key beside the bucket; when they differ
// (the first call on this server: a new key, a failover to a replica, a
// restart) or the marker expired (after policyMarkerLife, so that a
// policy changed at run time is seen within it), it reads maxmemory_policy from INFO memory
// and, for noeviction, writes the marker with the server's run_id. Any
// other policy is an EVICTS error: nothing changes, and the Budget treats
// it as a failure of Redis, falling back to its local bucket (the fleet's
// burst then stays near capacity, capacity/FleetSize per process) and
// probing again with backoff until the policy is noeviction. The marker
// replicates with the bucket, but a replica that takes over has another
// run_id, so it is checked before its first call.
//
// Under noeviction a full Redis refuses the script's writes (an OOM
// error) and the Budget falls back the same way: no write, no grant.

// policyMarkerLife is how long the marker of a server found not to evict
// lives. The marker is shared by every process on the key, so the fleet
// reads INFO memory about once per policyMarkerLife, whatever its size.
const policyMarkerLife = time.Second

// ErrBudgetEviction is what a [Budget] reports, wrapped with the Redis
// error naming the policy (to its Logger when it falls back, and from
// Flush), when the Redis server that runs its calls may evict keys: any
// maxmemory-policy but noeviction. An evicted bucket comes back full, so
// the Budget uses its local bucket instead, until the server's policy is
// noeviction or [Options.AllowEviction] is set.
var ErrBudgetEviction = errors.New("redisretry: Redis may evict the retry budget's keys under memory pressure " +
	"(an evicted bucket comes back full, and the fleet's retries would exceed the budget); set maxmemory-policy noeviction " +
	"or Options.AllowEviction")

// checkedKey returns the name of the marker key: the key's slot prefix,
// as the nonces use.
func checkedKey(noncePrefix string) string {
	return strings.TrimSuffix(noncePrefix, "nonce:") + "noeviction"
}

// checkPolicy returns the script's ARGV[7]: 1 when the server's eviction
// policy is checked, 0 with AllowEviction.
func (b *Budget) checkPolicy() int {
	if b.opts.AllowEviction {
		return 0
	}
	return 1
}
