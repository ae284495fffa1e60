package bench

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
)

// opHeader names the operation a request belongs to. The benchmark picks a
// new value per operation and sends it on every attempt, so the server can
// fail the first two hits of each operation whoever is retrying.
const opHeader = "X-Op"

// failHits is how many hits of each operation the server answers with 503
// before it answers 200: two failures, then success on the third attempt.
const failHits = 2

// opSlots bounds the server's per-operation state. Operations run one after
// another, so an operation's slot is free again long before it is reused.
const opSlots = 1024

var (
	okBody          = bytes.Repeat([]byte("b"), 64)
	unavailableBody = []byte("service unavailable, try again\n")
	// Shared header values keep the handler from allocating them or
	// sniffing the content type on every hit.
	textPlain = []string{"text/plain; charset=utf-8"}
)

// peerServer is the one loopback server every implementation talks to. It
// counts hits, new connections and request body bytes, and fails the first
// two hits of every operation that names itself in opHeader.
type peerServer struct {
	*httptest.Server
	ops       opCounter
	hits      atomic.Int64
	conns     atomic.Int64 // connections in http.StateNew
	bodyBytes atomic.Int64 // request body bytes read
}

// newPeerServer starts a server on 127.0.0.1 (httptest's local listener).
func newPeerServer() *peerServer {
	s := &peerServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	return s
}

func (s *peerServer) serve(w http.ResponseWriter, r *http.Request) {
	s.hits.Add(1)
	n, _ := io.Copy(io.Discard, r.Body)
	s.bodyBytes.Add(n)
	w.Header()["Content-Type"] = textPlain
	fail, err := s.ops.fail(r)
	switch {
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadRequest)
	case fail:
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write(unavailableBody)
	default:
		w.Write(okBody)
	}
}

// opCounter keeps the hit count of recent operations, so that each one
// fails its first failHits hits whoever is retrying it.
type opCounter struct {
	mu  sync.Mutex     // protects ops
	ops [opSlots]opHit // indexed by operation id modulo opSlots
}

// opHit is the hit count of one operation.
type opHit struct {
	id   int64
	hits int
}

// fail records a hit of the operation r names in opHeader and reports
// whether it must fail. A request without opHeader never fails.
func (c *opCounter) fail(r *http.Request) (bool, error) {
	v := r.Header.Get(opHeader)
	if v == "" {
		return false, nil
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return false, fmt.Errorf("bad %s: %w", opHeader, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	o := &c.ops[id%opSlots]
	if o.id != id {
		*o = opHit{id: id}
	}
	o.hits++
	return o.hits <= failHits, nil
}
