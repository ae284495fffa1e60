package redisretry

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// WAIT n counts the replicas that have a write, not the replicas that
// could be promoted, and during a failover they are not the same: a
// Sentinel switchover promotes one replica while the old primary stays
// master for about a second with the others attached, and clients keep
// writing to it; WAIT 1 counts one of those others, and both drop the
// write when they resync from the new primary. A write only a failover
// cannot lose is one that every replica acknowledged: then the promoted
// one has it, and once one replica leaves (promoted, or cut off), WAIT
// for all of them cannot succeed on the old primary. So the store takes
// WaitReplicas to be the number of replicas each master has, and
// refuses a write on a master that has more.
//
// The count it compares is the greater of the replicas the master's ROLE
// lists now and the most any master of the store listed within
// replicaMemory: the old primary of a switchover lists one replica fewer
// while it is the most dangerous, and a replica just promoted lists its
// replicas one by one as they attach, so a store whose WaitReplicas
// counts too few must not start acknowledging there. One count serves
// every master (on a Cluster, each master is expected to have as many
// replicas): after a failover the promoted replica answers at another
// address, never seen before. A replica removed for good is forgotten
// after replicaMemory.

// ErrReplicasUncounted is what Reserve and Complete return, wrapped, when
// the master that took the write has, or a master of the store had
// within the last minute, more replicas than
// [IdempotencyOptions.WaitReplicas]: a failover could promote a replica
// that lacks the write. A reservation is undone, as for
// [ErrNotReplicated]. Set WaitReplicas to the number of replicas of each
// master.
var ErrReplicasUncounted = errors.New("redisretry: the master has more replicas than IdempotencyOptions.WaitReplicas; " +
	"a failover could promote one that lacks the write: set WaitReplicas to the number of replicas")

// replicaMemory is how long the store remembers the most replicas a
// master listed: longer than a failover's window.
const replicaMemory = time.Minute

// sighting is the most replicas a master listed lately, and when.
type sighting struct {
	n  int
	at time.Time
}

// remember returns what the memory of a master holds after a call saw
// it list connected replicas at now: that count if it is not below the
// remembered one, or if the remembered one is older than replicaMemory;
// the remembered one otherwise.
func remember(last sighting, connected int, now time.Time) sighting {
	if connected >= last.n || now.Sub(last.at) >= replicaMemory {
		return sighting{n: connected, at: now}
	}
	return last
}

// replicaCounts remembers the most replicas a master listed lately.
type replicaCounts struct {
	mu   sync.Mutex // protects most
	most sighting
}

// see records that a master listed connected replicas at now, and
// returns the most a master listed within replicaMemory.
func (c *replicaCounts) see(connected int, now time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.most = remember(c.most, connected, now)
	return c.most.n
}

// errNotMaster is ROLE's answer from a server that is not a master.
var errNotMaster = errors.New("the server is not a master")

// parseRole returns how many replicas a master's ROLE reply lists:
// ["master", offset, [[ip, port, offset], ...]].
func parseRole(role *redis.Cmd) (int, error) {
	v, err := role.Slice()
	if err != nil {
		return 0, err
	}
	if len(v) != 3 {
		return 0, fmt.Errorf("reply of %d fields; want 3", len(v))
	}
	if r, _ := v[0].(string); r != "master" {
		return 0, fmt.Errorf("%w (%q)", errNotMaster, r)
	}
	replicas, ok := v[2].([]any)
	if !ok {
		return 0, fmt.Errorf("replicas field %T; want a list", v[2])
	}
	return len(replicas), nil
}
