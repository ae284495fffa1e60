// Command resty runs go-resty (v2) over httpretry against a local fake of
// a small orders API.
//
// resty retries only when asked (SetRetryCount; the default is 0), so it
// needs no switch turned off: leave its retry count at 0 and wrap its
// transport. Wrap last: resty's SetTLSClientConfig, SetProxy and
// RemoveProxy reach into the client's *http.Transport, and once the
// transport is an httpretry.Transport they only log an error and change
// nothing. Configure them first, then wrap the transport resty built.
//
//	go run ./resty
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/go-resty/resty/v2"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/examples/sdks/internal/fake"
)

// Order is an order as the fake API returns it.
type Order struct {
	ID    string `json:"id"`
	Items int    `json:"items"`
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "resty:", err)
		os.Exit(1)
	}
}

// newClient returns a resty client for baseURL whose transport, after any
// setting that edits the *http.Transport, is wrapped by httpretry.
// configure runs before the wrapping: the place for SetTLSClientConfig,
// SetProxy and the like.
func newClient(baseURL string, configure func(*resty.Client)) (*resty.Client, *httpretry.Transport) {
	c := resty.New().SetBaseURL(baseURL) // RetryCount stays 0: resty does not retry
	if configure != nil {
		configure(c)
	}
	tr := &httpretry.Transport{
		Base:              c.GetClient().Transport,
		Timeout:           5 * time.Second,
		NewIdempotencyKey: httpretry.RandomKey, // POSTs get one key, sent on every attempt
	}
	c.SetTransport(tr)
	return c, tr
}

func run(w io.Writer) error {
	srv := fake.NewServer(flaky)
	defer srv.Close()
	c, tr := newClient(srv.URL, nil)
	defer tr.CloseIdleConnections()

	var order Order
	resp, err := c.R().SetResult(&order).Get("/orders/o1")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "GET /orders/o1: %d, order %s with %d items\n", resp.StatusCode(), order.ID, order.Items)

	resp, err = c.R().SetBody(Order{Items: 3}).SetResult(&order).Post("/orders")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "POST /orders: %d, order %s with %d items\n", resp.StatusCode(), order.ID, order.Items)
	fmt.Fprintf(w, "server requests: %d\n", srv.Hits())
	return nil
}

// flaky answers every odd request with 503 and every even one properly.
func flaky(w http.ResponseWriter, r *http.Request, hit int) {
	if hit%2 == 1 {
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	var o Order
	switch r.Method {
	case http.MethodGet:
		o = Order{ID: r.URL.Path[len("/orders/"):], Items: 2}
	case http.MethodPost:
		if err := json.NewDecoder(r.Body).Decode(&o); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		o.ID = "o2"
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(o)
}
