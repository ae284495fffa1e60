package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
)

// load sends rps operations per second through client until ctx ends: 9
// in 10 GET /books/{id}, 1 in 10 POST /orders. Each operation runs in its
// own goroutine, as requests of a server would; load returns once all
// have ended, with the number of operations it sent.
func load(ctx context.Context, client *http.Client, baseURL string, rps int) int {
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(time.Second / time.Duration(rps))
	defer tick.Stop()
	rnd := rand.New(rand.NewPCG(3, 4))
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return n
		case <-tick.C:
		}
		method, url, body := http.MethodGet, fmt.Sprintf("%s/books/b%d", baseURL, rnd.IntN(1000)), ""
		if n%10 == 9 {
			method, url, body = http.MethodPost, baseURL+"/orders", `{"item":"book","qty":1}`
		}
		wg.Go(func() { send(client, method, url, body) })
	}
}

// send makes one request and discards the response. Its errors are the
// demo's subject, counted by the metrics, not failures of the demo.
func send(client *http.Client, method, url, body string) {
	req, err := http.NewRequestWithContext(context.Background(), method, url, strings.NewReader(body))
	if err != nil {
		return
	}
	resp, err := client.Do(req)
	if err != nil {
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}
