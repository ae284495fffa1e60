package paymentsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/httpretry/httpretry/idempotency"
)

// OrderHeader carries the order's ID on every request, so that the fault
// injector decides per order and attempt, whatever the scheduling.
const OrderHeader = "X-Order-Id"

// ChargePath is the payment service's charge endpoint.
const ChargePath = "/charge"

// Charge is the request body of a charge and, with ChargeID set, its
// answer.
type Charge struct {
	Order    string `json:"order"`
	Amount   int    `json:"amount"`
	ChargeID int64  `json:"charge_id,omitempty"`
}

// ChargeHandler is the payment service's charge endpoint without
// idempotency: it charges the order at the provider and answers 201 with
// the charge. Wrap it in idempotency.Handler.
func ChargeHandler(p *Provider) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c Charge
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&c); err != nil || c.Order == "" || c.Amount <= 0 {
			http.Error(w, "paymentsim: want a JSON charge with an order and a positive amount", http.StatusBadRequest)
			return
		}
		if c.ChargeID = p.Charge(r.Context(), c.Order); c.ChargeID == 0 {
			http.Error(w, "paymentsim: charge canceled", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(c)
	})
}

// Events counts a Handler's events by kind, for its OnEvent hook. The
// zero value is ready to use; Events is safe for concurrent use.
type Events struct {
	counts [16]atomic.Int64 // by the Kind's index in idempotency.Kinds
}

// Record counts e.
func (ev *Events) Record(e idempotency.Event) {
	for i, k := range idempotency.Kinds() {
		if k == e.Kind {
			ev.counts[i].Add(1)
			return
		}
	}
}

// Count returns how many events of kind were recorded.
func (ev *Events) Count(kind idempotency.Kind) int64 {
	for i, k := range idempotency.Kinds() {
		if k == kind {
			return ev.counts[i].Load()
		}
	}
	return 0
}

// String lists the kinds seen, with their counts, in the order of
// idempotency.Kinds.
func (ev *Events) String() string {
	s := ""
	for _, k := range idempotency.Kinds() {
		if n := ev.Count(k); n > 0 {
			if s != "" {
				s += " "
			}
			s += fmt.Sprintf("%s=%d", k, n)
		}
	}
	return s
}
