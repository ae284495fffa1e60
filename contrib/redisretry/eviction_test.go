package redisretry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/httpretry/httpretry/idempotency"
)

// A store refuses, before writing anything, a Redis with maxmemory set
// and any policy but noeviction, which may evict a running operation's
// lock; it works under noeviction, and with AllowEviction.
func TestIdempotencyStoreRefusesEvictionPolicies(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, "--maxmemory", "100mb").Client(t)
	cases := []struct {
		policy  string
		allow   bool
		refused bool
	}{
		{"noeviction", false, false},
		{"volatile-ttl", false, true},
		{"volatile-lru", false, true},
		{"volatile-lfu", false, true},
		{"volatile-random", false, true},
		{"allkeys-lru", false, true},
		{"allkeys-random", false, true},
		{"volatile-ttl", true, false},
	}
	for _, c := range cases {
		if err := rdb.ConfigSet(ctx, "maxmemory-policy", c.policy).Err(); err != nil {
			t.Fatalf("CONFIG SET maxmemory-policy %s: %v", c.policy, err)
		}
		s, prefix := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient, AllowEviction: c.allow})
		r, err := s.Reserve(ctx, "k", "fp", time.Minute)
		checkErr := s.CheckEvictionPolicy(ctx)
		if !c.refused {
			if err != nil || r.State != idempotency.StateReserved {
				t.Errorf("%s (allow %v): Reserve = %+v, %v; want reserved", c.policy, c.allow, r, err)
			}
			if (checkErr == nil) != (c.policy == "noeviction") {
				t.Errorf("%s: CheckEvictionPolicy = %v; want an error only for a policy that evicts", c.policy, checkErr)
			}
			continue
		}
		if !errors.Is(err, ErrEvictionPolicy) || !strings.Contains(err.Error(), "(it is "+c.policy+")") {
			t.Errorf("%s: Reserve error = %v; want ErrEvictionPolicy naming the policy", c.policy, err)
		}
		if !errors.Is(checkErr, ErrEvictionPolicy) {
			t.Errorf("%s: CheckEvictionPolicy = %v; want ErrEvictionPolicy", c.policy, checkErr)
		}
		if keys := rdb.Keys(ctx, prefix+"*").Val(); len(keys) != 0 {
			t.Errorf("%s: keys written before the refusal: %q", c.policy, keys)
		}
	}
}

// A refusal is not remembered: once the policy is noeviction, the next
// Reserve works.
func TestIdempotencyStoreRechecksAfterRefusal(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, "--maxmemory", "100mb", "--maxmemory-policy", "volatile-ttl").Client(t)
	s, _ := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient})
	if _, err := s.Reserve(ctx, "k", "fp", time.Minute); !errors.Is(err, ErrEvictionPolicy) {
		t.Fatalf("Reserve under volatile-ttl = %v; want ErrEvictionPolicy", err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Reserve(ctx, "k", "fp", time.Minute); err != nil || r.State != idempotency.StateReserved {
		t.Fatalf("Reserve under noeviction = %+v, %v; want reserved", r, err)
	}
}

// Where CONFIG is disabled (renamed away, as managed services do), the
// policy is read from INFO memory.
func TestIdempotencyStoreReadsPolicyFromInfo(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		policy  string
		refused bool
	}{{"noeviction", false}, {"volatile-ttl", true}} {
		srv := redistest.Start(t, "--maxmemory", "100mb", "--maxmemory-policy", c.policy, "--rename-command", "CONFIG", "")
		rdb := srv.Client(t)
		if err := rdb.ConfigGet(ctx, "maxmemory-policy").Err(); err == nil {
			t.Fatal("CONFIG GET works; want it disabled")
		}
		s, _ := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient})
		_, err := s.Reserve(ctx, "k", "fp", time.Minute)
		if got := errors.Is(err, ErrEvictionPolicy); got != c.refused || (!c.refused && err != nil) {
			t.Errorf("%s without CONFIG: Reserve error = %v; want refused %v", c.policy, err, c.refused)
		}
	}
}

// A Handler over a store that refuses answers 503 and runs nothing.
func TestHandlerOverEvictingRedisRunsNothing(t *testing.T) {
	rdb := redistest.Start(t, "--maxmemory", "100mb", "--maxmemory-policy", "volatile-ttl").Client(t)
	s, _ := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient})
	ran := 0
	h := idempotency.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran++ }), s, idempotency.Options{})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/charge", strings.NewReader("{}"))
	req.Header.Set("Idempotency-Key", "k")
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || ran != 0 {
		t.Fatalf("status %d, handler ran %d times; want 503 and none", rec.Code, ran)
	}
}

func TestPolicyFromInfo(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, info, want string
		ok               bool
	}{
		{"redis7", "# Memory\r\nused_memory:1\r\nmaxmemory:0\r\nmaxmemory_policy:noeviction\r\nallocator_frag_ratio:1\r\n", "noeviction", true},
		{"volatile", "maxmemory_policy:volatile-ttl\n", "volatile-ttl", true},
		{"absent", "# Memory\r\nused_memory:1\r\n", "", false},
		{"empty", "maxmemory_policy:\r\n", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := policyFromInfo(c.info)
			if got != c.want || ok != c.ok {
				t.Errorf("policyFromInfo = %q, %v; want %q, %v", got, ok, c.want, c.ok)
			}
		})
	}
}

// A Redis that refuses both CONFIG and INFO is refused too, with an
// error that says what to allow; AllowEviction runs on it.
func TestIdempotencyStoreRefusesRedisThatHidesItsPolicy(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, "--rename-command", "CONFIG", "", "--rename-command", "INFO", "")
	rdb := srv.Client(t)
	s, _ := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient})
	_, err := s.Reserve(ctx, "k", "fp", time.Minute)
	if err == nil || !strings.Contains(err.Error(), "cannot read maxmemory-policy") || !strings.Contains(err.Error(), "AllowEviction") {
		t.Fatalf("Reserve = %v; want an error saying the policy cannot be read and how to proceed", err)
	}
	allowing, _ := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient, AllowEviction: true})
	if r, err := allowing.Reserve(ctx, "k", "fp", time.Minute); err != nil || r.State != idempotency.StateReserved {
		t.Fatalf("Reserve with AllowEviction = %+v, %v; want reserved", r, err)
	}
}

// A noeviction verdict stands for policyRecheck; a check that gets no
// answer leaves the last verdict as it was, and one that finds another
// policy forgets it.
func TestPolicyVerdicts(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		last, now time.Time
		want      bool
	}{
		{time.Time{}, t0, false},
		{t0, t0, true},
		{t0, t0.Add(policyRecheck - time.Nanosecond), true},
		{t0, t0.Add(policyRecheck), false},
	} {
		if got := policyFresh(tc.last, tc.now); got != tc.want {
			t.Errorf("policyFresh(%v, %v) = %v; want %v", tc.last, tc.now, got, tc.want)
		}
	}
	for _, tc := range []struct {
		err  error
		want verdict
	}{
		{nil, verdictPass},
		{judgePolicy("allkeys-lru"), verdictRefuse},
		{wrapStoreErr("reserve", context.DeadlineExceeded), verdictKeep},
		{errors.New("connection refused"), verdictKeep},
	} {
		if got := verdictOf(tc.err); got != tc.want {
			t.Errorf("verdictOf(%v) = %d; want %d", tc.err, got, tc.want)
		}
	}
	var v verdicts
	v.record("a:1", t0, nil)
	v.record("a:1", t0.Add(time.Second), wrapStoreErr("reserve", context.DeadlineExceeded))
	if !v.fresh("a:1", t0.Add(2*time.Second)) {
		t.Error("a timed-out check reset a good verdict")
	}
	if v.fresh("b:1", t0) {
		t.Error("a server never checked has a verdict")
	}
	v.record("a:1", t0.Add(3*time.Second), judgePolicy("volatile-ttl"))
	if v.fresh("a:1", t0.Add(3*time.Second)) {
		t.Error("a refused policy left the good verdict standing")
	}
	for i := range maxVerdicts + 1 {
		v.record(fmt.Sprint("h:", i), t0, nil)
	}
	if n := len(v.ok); n > maxVerdicts {
		t.Errorf("%d verdicts remembered; want at most %d", n, maxVerdicts)
	}
}
