package main

import (
	"fmt"

	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/redis/go-redis/v9"
)

// redisTarget is where the fleet scenario keeps its shared budget: one
// redis-server, or a Redis Cluster of three masters, each a child process
// on loopback started by the redistest package, without persistence.
type redisTarget struct {
	name    string // "" for one server, "cluster" for the Cluster
	connect func(hook redis.Hook) redis.UniversalClient
	close   func() error
}

// startRedis starts one redis-server. It fails with a message naming the
// package when redis-server is not on PATH.
func startRedis() (*redisTarget, error) {
	s, err := redistest.New("--save", "", "--appendonly", "no")
	if err != nil {
		return nil, needRedis(err)
	}
	return &redisTarget{
		connect: func(hook redis.Hook) redis.UniversalClient {
			rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), PoolSize: 4, ContextTimeoutEnabled: true})
			rdb.AddHook(hook)
			return rdb
		},
		close: s.Close,
	}, nil
}

// startCluster starts a Redis Cluster of three masters and no replicas.
// Each process's client counts the commands it sends to every node,
// layout queries included.
func startCluster() (*redisTarget, error) {
	c, err := redistest.NewCluster(3, 0, "--save", "", "--appendonly", "no")
	if err != nil {
		return nil, needRedis(err)
	}
	return &redisTarget{
		name: "cluster",
		connect: func(hook redis.Hook) redis.UniversalClient {
			o := c.ClusterOptions()
			// Nothing fails over in the storm: the default layout reload
			// (every 60 s) is what a deployment has.
			o.ClusterStateReloadInterval = 0
			o.PoolSize = 4
			rdb := redis.NewClusterClient(o)
			rdb.OnNewNode(func(node *redis.Client) { node.AddHook(hook) })
			return rdb
		},
		close: c.Close,
	}, nil
}

func needRedis(err error) error {
	return fmt.Errorf("the fleet scenario needs redis-server and redis-cli: install the redis-server and redis-tools packages "+
		"(make deps, or apt-get install redis-server redis-tools; on macOS brew install redis): %w", err)
}
