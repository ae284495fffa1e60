package paymentsim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/idempotency"
)

// KeyLog is the order client's base RoundTripper: it sends each attempt
// with Base and notes the Idempotency-Key the httpretry Transport put on
// it, by order, so that failed orders can be reconciled with their key.
type KeyLog struct {
	Base http.RoundTripper

	mu   sync.Mutex // protects keys
	keys map[string]string
}

// RoundTrip notes req's key and sends it.
func (k *KeyLog) RoundTrip(req *http.Request) (*http.Response, error) {
	k.mu.Lock()
	if k.keys == nil {
		k.keys = make(map[string]string)
	}
	k.keys[req.Header.Get(OrderHeader)] = req.Header.Get(idempotency.KeyHeader)
	k.mu.Unlock()
	return k.Base.RoundTrip(req)
}

// CloseIdleConnections closes Base's idle connections, if it has any.
func (k *KeyLog) CloseIdleConnections() {
	if c, ok := k.Base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// Key returns the key the order's attempts carried.
func (k *KeyLog) Key(order string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys[order]
}

// NewOrderClient returns the order client: httpretry with a random
// Idempotency-Key per order, 2s per order and attemptTimeout per attempt,
// four attempts, and no retry budget (the injected fault rate is far above
// what a budget admits; this run is about correctness, not load). Its
// KeyLog records the keys.
func NewOrderClient(attemptTimeout time.Duration, conns int) (*http.Client, *KeyLog) {
	keys := &KeyLog{Base: &http.Transport{MaxIdleConnsPerHost: conns}}
	return &http.Client{Transport: &httpretry.Transport{
		Base:              keys,
		NewIdempotencyKey: httpretry.RandomKey,
		Timeout:           2 * time.Second,
		AttemptTimeout:    attemptTimeout,
		MaxAttempts:       4,
		Budget:            httpretry.Unlimited,
	}}, keys
}

// Result is what the client got for one order.
type Result struct {
	Order  string
	Status int    // 0 when Err is set
	Charge Charge // the answer of a 201
	// Replayed: the answer said Idempotent-Replayed: true.
	Replayed bool
	Err      error
}

// OrderID names order number i.
func OrderID(i int) string { return fmt.Sprintf("order-%05d", i) }

// PlaceOrders places orders 0 to n-1 at url with client, workers at a
// time, and returns their results in order.
func PlaceOrders(ctx context.Context, client *http.Client, url string, n, workers int) []Result {
	results := make([]Result, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				results[i] = placeOrder(ctx, client, url, OrderID(i), nil)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return results
}

// placeOrder charges order 100+its number of cents at url, with the
// extra headers given.
func placeOrder(ctx context.Context, client *http.Client, url, order string, hdr http.Header) Result {
	body, _ := json.Marshal(Charge{Order: order, Amount: 100 + len(order)})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+ChargePath, bytes.NewReader(body))
	if err != nil {
		return Result{Order: order, Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(OrderHeader, order)
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	resp, err := client.Do(req)
	if err != nil {
		return Result{Order: order, Err: err}
	}
	defer resp.Body.Close()
	r := Result{Order: order, Status: resp.StatusCode, Replayed: resp.Header.Get(idempotency.ReplayedHeader) == "true"}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		r.Err = err
		return r
	}
	if resp.StatusCode == http.StatusCreated {
		r.Err = json.Unmarshal(b, &r.Charge)
	}
	return r
}

// Summary counts results.
type Summary struct {
	Orders    int
	Succeeded int // answered 201
	// Unknown failed with an error that matches httpretry.ErrOutcomeUnknown.
	Unknown int
	// Final failed with an *httpretry.Error that is not unknown, by
	// reason.
	Final map[httpretry.StopReason]int
	// Statuses failed with a final response other than 201, by status:
	// 409 when the order's first attempt still ran at the service and
	// the client's time ran out before the Retry-After it was given.
	Statuses map[int]int
	// Other failed with an error that is not an *httpretry.Error (which
	// the checks count as a defect).
	Other int
}

// Summarize counts results.
func Summarize(results []Result) Summary {
	s := Summary{Orders: len(results), Final: map[httpretry.StopReason]int{}, Statuses: map[int]int{}}
	for _, r := range results {
		var herr *httpretry.Error
		switch {
		case r.Err == nil && r.Status == http.StatusCreated:
			s.Succeeded++
		case r.Err == nil:
			s.Statuses[r.Status]++
		case errors.Is(r.Err, httpretry.ErrOutcomeUnknown):
			s.Unknown++
		case errors.As(r.Err, &herr):
			s.Final[herr.Reason]++
		default:
			s.Other++
		}
	}
	return s
}

// Reconciliation is what reconciling the failed orders found.
type Reconciliation struct {
	// Replayed orders had been charged: the service replayed their
	// charge.
	Replayed int
	// Charged orders had not been: they were charged now.
	Charged int
	// Failed orders could not be reconciled (a defect).
	Failed []string
}

// Reconcile sends every failed order of results again, with the key its
// attempts carried, straight to url (no faults), as a client does to learn
// the outcome of an order it could not confirm.
func Reconcile(ctx context.Context, url string, results []Result, keys *KeyLog) Reconciliation {
	var rec Reconciliation
	// A minute per order: this client does not retry, and no loaded
	// machine takes that long; it only keeps a broken run from hanging.
	client := &http.Client{Transport: &http.Transport{}, Timeout: time.Minute}
	defer client.CloseIdleConnections()
	for _, r := range results {
		if r.Err == nil && r.Status == http.StatusCreated {
			continue
		}
		key := keys.Key(r.Order)
		res := placeOrder(ctx, client, url, r.Order, http.Header{idempotency.KeyHeader: {key}})
		switch {
		case key == "" || res.Err != nil || res.Status != http.StatusCreated:
			rec.Failed = append(rec.Failed, r.Order)
		case res.Replayed:
			rec.Replayed++
		default:
			rec.Charged++
		}
	}
	return rec
}

// Only returns the results of orders, in the order of results: the
// orders a first Reconcile could not reconcile, for another.
func Only(results []Result, orders []string) []Result {
	want := make(map[string]bool, len(orders))
	for _, o := range orders {
		want[o] = true
	}
	var out []Result
	for _, r := range results {
		if want[r.Order] {
			out = append(out, r)
		}
	}
	return out
}
