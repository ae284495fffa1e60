package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/contrib/redisretry"
	"github.com/httpretry/httpretry/throttle"
)

func TestZZTransportSim(t *testing.T) {
	rt, err := startRedis()
	if err != nil {
		t.Fatal(err)
	}
	defer rt.close()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(503)
	}))
	defer srv.Close()
	const P = 1000
	clients := make([]*http.Client, P)
	ths := make([]*throttle.Throttle, P)
	for i := range clients {
		rdb := rt.connect(nopHook{})
		st, _ := redisretry.NewThrottleState(rdb, "zz", redisretry.ThrottleStateOptions{})
		defer func() { st.Close(); rdb.Close() }()
		ths[i] = &throttle.Throttle{Shared: st}
		tr := &httpretry.Transport{Base: cleanhttp.DefaultPooledTransport(), Throttle: ths[i], BudgetPerHost: true}
		clients[i] = &http.Client{Transport: tr}
	}
	admin := rt.connect(nopHook{})
	waitSubscribed(context.Background(), admin, P)
	var offered atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * time.Millisecond)
			for time.Since(start) < 8*time.Second {
				offered.Add(1)
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/x", nil)
				if resp, err := c.Do(req); err == nil {
					resp.Body.Close()
				}
				cancel()
				time.Sleep(time.Second)
			}
		})
	}
	go func() {
		var lo, lh int64
		for time.Since(start) < 8*time.Second {
			time.Sleep(time.Second)
			o, h := offered.Load(), hits.Load()
			t.Logf("t=%.0f offered %d hits %d", time.Since(start).Seconds(), o-lo, h-lh)
			lo, lh = o, h
		}
	}()
	wg.Wait()
	t.Logf("total %.2f", float64(hits.Load())/float64(offered.Load()))
}
