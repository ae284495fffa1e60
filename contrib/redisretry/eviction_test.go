package redisretry

import (
	"context"
	"errors"
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

// A policy changed at run time (CONFIG SET) is seen by the very next
// Reserve: the check runs inside the reserve script, on the server that
// runs it, with no verdict kept between calls.
func TestPolicyChangedAtRunTimeRefusesTheNextReserve(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, "--maxmemory", "100mb").Client(t)
	s, prefix := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient})
	if r, err := s.Reserve(ctx, "k1", "fp", time.Minute); err != nil || r.State != idempotency.StateReserved {
		t.Fatalf("Reserve under noeviction = %+v, %v; want reserved", r, err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	_, err := s.Reserve(ctx, "k2", "fp", time.Minute)
	if !errors.Is(err, ErrEvictionPolicy) || !strings.Contains(err.Error(), "(it is allkeys-lru)") {
		t.Fatalf("Reserve right after CONFIG SET allkeys-lru = %v; want ErrEvictionPolicy naming it", err)
	}
	if n := rdb.Exists(ctx, recordKey(prefix, "k2"), lockKey(prefix, "k2")).Val(); n != 0 {
		t.Fatalf("%d records of the refused key; want none", n)
	}
}

// The reserve script's answers that wrote nothing: a policy that evicts
// (named), one that could not be read, an abandoned call; every state is
// left to parseReservation.
func TestReserveRefusal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		res    []any
		is     error
		substr string
	}{
		{"policy", []any{int64(5), "volatile-ttl"}, ErrEvictionPolicy, "(it is volatile-ttl)"},
		{"unread policy", []any{int64(5), ""}, errPolicyUnread, "allow INFO"},
		{"policy missing", []any{int64(5)}, errPolicyUnread, "AllowEviction"},
		{"abandoned", []any{int64(6)}, errAbandoned, "abandoned"},
		{"reserved", []any{int64(1), int64(7), int64(0), "0", int64(0)}, nil, ""},
		{"in progress", []any{int64(2)}, nil, ""},
		{"empty", []any{}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := reserveRefusal(tc.res)
			if tc.is == nil {
				if err != nil {
					t.Fatalf("reserveRefusal(%v) = %v; want nil", tc.res, err)
				}
				return
			}
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.substr) || !strings.HasPrefix(err.Error(), "redisretry: ") {
				t.Fatalf("reserveRefusal(%v) = %v; want %v saying %q", tc.res, err, tc.is, tc.substr)
			}
		})
	}
}
