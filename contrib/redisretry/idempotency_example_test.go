package redisretry_test

import (
	"log"
	"net/http"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry"
	"github.com/httpretry/httpretry/idempotency"
	"github.com/redis/go-redis/v9"
)

// Every instance of the payment service records idempotency keys in one
// Redis, so that a client's retry reaching another instance is answered
// the first response instead of charging again.
func ExampleNewIdempotencyStore() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	store, err := redisretry.NewIdempotencyStore(rdb, "idem:payments:", redisretry.IdempotencyOptions{
		CallTimeout: 500 * time.Millisecond,
	})
	if err != nil {
		log.Fatal(err)
	}
	charge := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated) // charge the card, answer the charge
	})
	mux := http.NewServeMux()
	mux.Handle("POST /charges", idempotency.Handler(charge, store, idempotency.Options{
		RequireKey:  true,
		ResponseTTL: 24 * time.Hour,
	}))
	_ = mux // http.ListenAndServe(addr, mux)
}
