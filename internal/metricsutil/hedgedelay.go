package metricsutil

import (
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/internal/desttable"
)

// maxHedgeTransports bounds the Transports a [HedgeDelays] reads: an
// adapter instrumenting more than this many hedging Transports reports
// the delays of the first ones.
const maxHedgeTransports = 16

// HedgeDelays reads, for a gauge, the current hedge delay of every latency
// key that the hedging Transports an adapter instruments have used: the
// delay after which a request of that key would be hedged now
// ([httpretry.Transport.HedgeDelay]). A key is the Transport's
// [httpretry.Hedging.Key] of a request (its host by default), a bounded
// name; at most maxKeys keys are kept, and keys that could not be a route
// value ([ValidRoute]) are left out. Create one with [NewHedgeDelays]; the
// zero value reports nothing. A HedgeDelays is safe for concurrent use.
type HedgeDelays struct {
	watching atomic.Bool // a hedging Transport is watched: requests name keys

	mu         sync.RWMutex // protects transports and keys
	transports []*httpretry.Transport
	keys       map[string]struct{}
	maxKeys    int
}

// NewHedgeDelays returns a HedgeDelays keeping at most maxKeys keys (0 or
// negative: DefaultMaxRoutes).
func NewHedgeDelays(maxKeys int) *HedgeDelays {
	if maxKeys <= 0 {
		maxKeys = DefaultMaxRoutes
	}
	return &HedgeDelays{keys: map[string]struct{}{}, maxKeys: maxKeys}
}

// Watch adds t to the Transports whose delays are read, if it hedges
// (its Hedging is set) and is not watched yet.
func (h *HedgeDelays) Watch(t *httpretry.Transport) {
	if h == nil || t == nil || t.Hedging == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.transports) < maxHedgeTransports && !slices.Contains(h.transports, t) {
		h.transports = append(h.transports, t)
		h.watching.Store(true)
	}
}

// Seen records the key req has under each watched Transport. It costs
// nothing until a hedging Transport is watched, then a read lock and a map
// lookup per Transport; it allocates only for a new key.
func (h *HedgeDelays) Seen(req *http.Request) {
	if h == nil || !h.watching.Load() {
		return
	}
	h.mu.RLock()
	var missing []string
	for _, t := range h.transports {
		k := hedgeKey(t, req)
		if _, ok := h.keys[k]; !ok && ValidRoute(k) && len(h.keys) < h.maxKeys {
			missing = append(missing, k)
		}
	}
	h.mu.RUnlock()
	if len(missing) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range missing {
		if len(h.keys) < h.maxKeys {
			h.keys[k] = struct{}{}
		}
	}
}

// hedgeKey is the latency key of req under t, as the Transport learns it
// ([httpretry.Hedging.Key]): the Key function's, or else the request's
// host in its one canonical spelling, so that a host spelled
// "API.Example.com:443" is read under the key its latencies were learned
// under.
func hedgeKey(t *httpretry.Transport, req *http.Request) string {
	if t.Hedging.Key != nil {
		return desttable.BoundKey(t.Hedging.Key(req))
	}
	return desttable.HostKey(req)
}

// Each calls f with every key, in order, and its current hedge delay: the
// first watched Transport's that would hedge a request of the key now. A
// key no Transport would hedge yet (too few latencies known) is left out.
func (h *HedgeDelays) Each(f func(key string, delay time.Duration)) {
	if h == nil {
		return
	}
	h.mu.RLock()
	keys := make([]string, 0, len(h.keys))
	for k := range h.keys {
		keys = append(keys, k)
	}
	transports := slices.Clone(h.transports)
	h.mu.RUnlock()
	slices.Sort(keys)
	for _, k := range keys {
		for _, t := range transports {
			if d, ok := t.HedgeDelay(k); ok {
				f(k, d)
				break
			}
		}
	}
}

// HedgeCounts returns what an operation's outcome says about its hedges,
// for counters: the hedges sent, 1 if the response returned was a hedge's
// ([httpretry.Outcome.HedgeWon]), the losers canceled, and the hedges
// refused. An operation that did not hedge returns zeros.
func HedgeCounts(o httpretry.Outcome) (sent, won, canceled, refused int) {
	if o.HedgeWon {
		won = 1
	}
	return o.Hedges, won, o.LosersCanceled, o.HedgesRefused
}
