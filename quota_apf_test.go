package httpretry

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// TestAPF429PausesOnlyItsPriorityLevel: a loopback Kubernetes API server
// whose answers name their API Priority and Fairness level, as every
// APF answer does: the apps routes are in "workload-low", saturated,
// answered with 429 and Retry-After 5; the lease routes in
// "leader-election", answered 200. After the 429, a list of deployments
// (the route the 429 answered) is refused locally until the Retry-After
// ends; the controller's lease renewal (another level) and a route no
// answer named yet still go. At the Retry-After's end, the deployments
// are sent again.
func TestAPF429PausesOnlyItsPriorityLevel(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	hits := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.Method+" "+r.URL.Path]++
		mu.Unlock()
		w.Header().Set("X-Kubernetes-PF-FlowSchema-UID", "fs-"+strings.Split(r.URL.Path, "/")[2])
		switch {
		case strings.HasPrefix(r.URL.Path, "/apis/apps/"):
			w.Header().Set("X-Kubernetes-PF-PriorityLevel-UID", "workload-low")
			w.Header().Set("Retry-After", "5")
			w.WriteHeader(http.StatusTooManyRequests)
		case strings.HasPrefix(r.URL.Path, "/apis/coordination.k8s.io/"):
			w.Header().Set("X-Kubernetes-PF-PriorityLevel-UID", "leader-election")
		}
	}))
	defer srv.Close()
	fc := clockwork.NewFakeClock()
	tr := &Transport{Base: srv.Client().Transport, Clock: fc, MaxAttempts: 1,
		Throttle: drawing(&throttle.Throttle{}, func() float64 { return 1 })}
	call := func(method, path string) (int, error) {
		req, _ := http.NewRequestWithContext(context.Background(), method, srv.URL+path, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	const deployments = "/apis/apps/v1/namespaces/default/deployments"
	const lease = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/controller"
	if st, err := call("PUT", lease); err != nil || st != 200 {
		t.Fatalf("lease renewal: %d, %v; want 200", st, err)
	}
	if st, err := call("GET", deployments); err != nil || st != 429 {
		t.Fatalf("deployments: %d, %v; want the server's 429", st, err)
	}
	if _, err := call("GET", deployments); !errors.Is(err, throttle.ErrQuotaExhausted) {
		t.Errorf("deployments during its level's Retry-After: %v; want refused locally (ErrQuotaExhausted)", err)
	}
	if st, err := call("PUT", lease); err != nil || st != 200 {
		t.Errorf("lease renewal during another level's Retry-After: %d, %v; want sent, 200", st, err)
	}
	if st, err := call("GET", "/api/v1/namespaces/default/pods"); err != nil || st != 200 {
		t.Errorf("pods, a route no answer named yet: %d, %v; want sent, 200", st, err)
	}
	fc.Advance(5 * time.Second)
	if st, err := call("GET", deployments); err != nil || st != 429 {
		t.Errorf("deployments after the Retry-After: %d, %v; want sent (the server's 429)", st, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if hits["GET "+deployments] != 2 || hits["PUT "+lease] != 2 || hits["GET /api/v1/namespaces/default/pods"] != 1 {
		t.Errorf("server saw %v; want deployments 2, lease 2, pods 1", hits)
	}
}
