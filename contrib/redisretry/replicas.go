package redisretry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultWaitTimeout is the bound of a wait for replicas when
// [IdempotencyOptions.WaitTimeout] is 0.
const DefaultWaitTimeout = 250 * time.Millisecond

// ErrNotReplicated is what Reserve and Complete return, wrapped, when
// fewer replicas than [IdempotencyOptions.WaitReplicas] acknowledged
// their write within WaitTimeout: a failover now could lose it.
var ErrNotReplicated = errors.New("redisretry: fewer replicas than WaitReplicas acknowledged the write in time")

// Redis replicates asynchronously: a primary acknowledges a write before
// any replica has it, and a replica promoted by Sentinel or Cluster after
// the primary died lacks what had not reached it yet. A reservation lost
// that way lets the client's retry reserve the key again and run the
// operation a second time. WAIT n ms, sent after a write on the same
// connection, blocks until n replicas have everything that connection
// wrote, or ms pass, and says how many did. It does not make a write
// durable (a replica may still be lost with the primary, and WAIT does
// not roll anything back), but a reservation that Reserve returned was
// on a replica too, so a failover to that replica keeps it.

// waitTimeout is the bound of each WAIT.
func (s *IdempotencyStore) waitTimeout() time.Duration {
	return min(durationOr(s.opts.WaitTimeout, DefaultWaitTimeout), s.callTimeout()/2)
}

// canWait refuses a client on which the store cannot send WAIT on the
// connection of the script: WAIT counts what its own connection wrote.
func canWait(rdb redis.UniversalClient) error {
	switch rdb.(type) {
	case *redis.Client, *redis.ClusterClient:
		return nil
	}
	return fmt.Errorf("redisretry: IdempotencyOptions.WaitReplicas needs a *redis.Client or a *redis.ClusterClient, not %T", rdb)
}

// run runs script on keys, sending it again through redirects,
// migrations and lost replies within ctx (see redirect.go). Without
// WaitReplicas it is script.Run. With it, the script, a WAIT and a ROLE
// go in one pipeline to the key's master, and acked is an error when the
// write is not safe from a failover: wrapping ErrNotReplicated when fewer
// replicas than WaitReplicas acknowledged (or the WAIT failed), wrapping
// ErrReplicasUncounted when the master has, or had lately, more replicas
// than WaitReplicas (see replicacount.go). It is nil otherwise, and
// whenever the script failed.
func (s *IdempotencyStore) run(ctx context.Context, op string, script *redis.Script, keys []string, args ...any) (cmd *redis.Cmd, acked error) {
	if s.opts.WaitReplicas <= 0 {
		return resend(ctx, false, s.reloader(ctx), func() *redis.Cmd {
			return script.Run(ctx, s.rdb, keys, args...)
		}), nil
	}
	var w waited
	cmd = resend(ctx, true, s.reloader(ctx), func() *redis.Cmd {
		var c *redis.Cmd
		c, w = s.runWaiting(ctx, script, keys, args...)
		return c
	})
	if cmd.Err() != nil {
		return cmd, nil
	}
	return cmd, s.judgeWait(op, w, time.Now())
}

// waited is what the pipeline of a waiting call says of replication: the
// WAIT's and the ROLE's replies.
type waited struct{ wait, role *redis.Cmd }

// runWaiting sends script, a WAIT and a ROLE in one pipeline to the
// master of keys' slot, as the client last learnt it, once.
func (s *IdempotencyStore) runWaiting(ctx context.Context, script *redis.Script, keys []string, args ...any) (*redis.Cmd, waited) {
	node, err := s.master(ctx, keys[0])
	if err != nil {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(err)
		return cmd, waited{}
	}
	cmd, w := s.pipeWait(ctx, node, func(p redis.Pipeliner) *redis.Cmd {
		return script.EvalSha(ctx, p, keys, args...)
	})
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		cmd, w = s.pipeWait(ctx, node, func(p redis.Pipeliner) *redis.Cmd {
			return script.Eval(ctx, p, keys, args...)
		})
	}
	return cmd, w
}

// pipeWait sends the script that eval adds, a WAIT and a ROLE in one
// pipeline on node, and returns the script's command and the others.
func (s *IdempotencyStore) pipeWait(ctx context.Context, node *redis.Client, eval func(redis.Pipeliner) *redis.Cmd) (cmd *redis.Cmd, w waited) {
	node.Pipelined(ctx, func(p redis.Pipeliner) error {
		cmd = eval(p)
		w.wait = p.Do(ctx, "wait", s.opts.WaitReplicas, millis(s.waitTimeout()))
		w.role = p.Do(ctx, "role")
		return nil
	})
	return cmd, w
}

// judgeWait returns nil when the write is safe from a failover of the
// server that took it, and otherwise an error naming op: wrapping
// ErrReplicasUncounted when the server has, or a master had lately (as of
// now), more replicas than WaitReplicas, wrapping ErrNotReplicated when WAIT counted
// fewer than WaitReplicas.
func (s *IdempotencyStore) judgeWait(op string, w waited, now time.Time) error {
	replicas, err := parseRole(w.role)
	if err != nil {
		return fmt.Errorf("%w: idempotency %s: ROLE: %w", ErrNotReplicated, op, err)
	}
	if most := s.replicas.see(replicas, now); most > s.opts.WaitReplicas {
		return fmt.Errorf("%w: idempotency %s: the master has %d replicas now, and a master had %d within %v; WaitReplicas is %d",
			ErrReplicasUncounted, op, replicas, most, replicaMemory, s.opts.WaitReplicas)
	}
	n, err := w.wait.Int64()
	if err != nil {
		return fmt.Errorf("%w: idempotency %s: WAIT: %w", ErrNotReplicated, op, err)
	}
	if n < int64(s.opts.WaitReplicas) {
		return fmt.Errorf("%w: idempotency %s: %d of %d within %v", ErrNotReplicated, op, n, s.opts.WaitReplicas, s.waitTimeout())
	}
	return nil
}

// master returns the client of the server that holds key: the store's
// client, or on a Cluster the master of key's slot as the client last
// learnt it.
func (s *IdempotencyStore) master(ctx context.Context, key string) (*redis.Client, error) {
	switch c := s.rdb.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	}
	return nil, canWait(s.rdb)
}
