package paymentsim

import (
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry"
	"github.com/httpretry/httpretry/idempotency"
	"github.com/redis/go-redis/v9"
)

// Fleet is two instances of the payment service, each an httptest
// server whose charge endpoint is an idempotency.Handler over a
// redisretry.IdempotencyStore with its own go-redis client, sharing one
// prefix; and the fault injector in front of them. Create it with
// [StartFleet] and Close it.
type Fleet struct {
	Provider  *Provider
	Events    *Events
	Injector  *Injector
	Front     *httptest.Server    // the injector
	Instances [2]*httptest.Server // the payment service

	clients [2]redis.UniversalClient
}

// Backend is where the fleet's stores keep their records: the Redis at
// Addr; when ClusterAddrs is set, the Redis Cluster those nodes form; when
// Sentinel is set, the primary those sentinels name.
type Backend struct {
	Addr         string
	ClusterAddrs []string
	Sentinel     *redis.FailoverOptions

	// WaitReplicas is the stores' IdempotencyOptions.WaitReplicas.
	WaitReplicas int
	// LockTTL is the Handlers' idempotency.Options.LockTTL; 0 means its
	// default.
	LockTTL time.Duration
}

// client returns a go-redis client of b whose calls and waits for a
// pooled connection callTimeout bounds.
func (b Backend) client(callTimeout time.Duration) redis.UniversalClient {
	if b.Sentinel != nil {
		o := *b.Sentinel
		o.ContextTimeoutEnabled = true
		o.PoolSize, o.PoolTimeout, o.ReadTimeout, o.WriteTimeout = 64, callTimeout, callTimeout, callTimeout
		return redis.NewFailoverClient(&o)
	}
	if len(b.ClusterAddrs) > 0 {
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: b.ClusterAddrs, ContextTimeoutEnabled: true,
			PoolSize: 64, PoolTimeout: callTimeout, ReadTimeout: callTimeout, WriteTimeout: callTimeout,
		})
	}
	return redis.NewClient(&redis.Options{
		Addr: b.Addr, ContextTimeoutEnabled: true,
		PoolSize: 64, PoolTimeout: callTimeout, ReadTimeout: callTimeout, WriteTimeout: callTimeout,
	})
}

// StartFleet starts the fleet on loopback, its stores on backend under
// prefix. callTimeout bounds each Redis call, and a wait for a pooled
// connection: tests whose verdict is not about Redis being slow make it
// longer than any loaded machine takes.
func StartFleet(backend Backend, prefix string, faults Faults, callTimeout time.Duration) (*Fleet, error) {
	f := &Fleet{Provider: &Provider{Latency: faults.Latency}, Events: &Events{}}
	for i := range f.Instances {
		rdb := backend.client(callTimeout)
		store, err := redisretry.NewIdempotencyStore(rdb, prefix, redisretry.IdempotencyOptions{
			CallTimeout: callTimeout, WaitReplicas: backend.WaitReplicas})
		if err != nil {
			rdb.Close()
			f.Close()
			return nil, err
		}
		f.clients[i] = rdb
		mux := http.NewServeMux()
		mux.Handle("POST "+ChargePath, idempotency.Handler(ChargeHandler(f.Provider), store,
			idempotency.Options{RequireKey: true, OnEvent: f.Events.Record, LockTTL: backend.LockTTL}))
		f.Instances[i] = httptest.NewServer(mux)
	}
	f.Injector = NewInjector(faults, f.Instances[0].URL, f.Instances[1].URL)
	f.Front = httptest.NewServer(f.Injector)
	return f, nil
}

// Close stops the servers, waiting for their requests, and closes the
// Redis clients.
func (f *Fleet) Close() {
	if f.Front != nil {
		f.Front.Close()
	}
	if f.Injector != nil {
		f.Injector.CloseIdleConnections()
	}
	for i := range f.Instances {
		if f.Instances[i] != nil {
			f.Instances[i].Close()
		}
		if f.clients[i] != nil {
			f.clients[i].Close()
		}
	}
}
