package redisretry_test

import (
	"log"
	"log/slog"
	"net/http"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/contrib/redisretry"
	"github.com/redis/go-redis/v9"
)

// One budget for every process that calls the payments service: during
// an outage the whole fleet sends at most 20 retries plus one for every
// ten operations.
func ExampleNewBudget() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	budget, err := redisretry.NewBudget(rdb, "retry-budget:payments", 20, 0.1, redisretry.Options{
		FleetSize: 30, // about how many processes share the key
		Logger:    slog.Default(),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer budget.Close()
	client := &http.Client{Transport: &httpretry.Transport{Budget: budget, Timeout: 2 * time.Second}}
	_ = client // client.Get("https://payments.internal/…")
}
