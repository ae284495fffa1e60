package redisretry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/httpretry/httpretry/idempotency"
	"github.com/httpretry/httpretry/idempotency/storetest"
	"github.com/redis/go-redis/v9"
)

var prefixes atomic.Int64

// uniquePrefix returns a store prefix no other test of this run uses.
func uniquePrefix(t *testing.T) string {
	return fmt.Sprintf("idemtest-%d-%s:", prefixes.Add(1), strings.ReplaceAll(t.Name(), "/", "-"))
}

func newIdempotencyStore(t *testing.T, rdb redis.UniversalClient, o IdempotencyOptions) (*IdempotencyStore, string) {
	t.Helper()
	p := uniquePrefix(t)
	s, err := NewIdempotencyStore(rdb, p, o)
	if err != nil {
		t.Fatalf("NewIdempotencyStore: %v", err)
	}
	return s, p
}

func hashed(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// recordKey and lockKey are the Redis keys of key's record and lock under
// prefix.
func recordKey(prefix, key string) string { return prefix + "{" + hashed(key) + "}:r" }
func lockKey(prefix, key string) string   { return prefix + "{" + hashed(key) + "}:l" }

// The shared conformance suite, against a real redis-server.
func TestIdempotencyStoreConformance(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		s, _ := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient})
		return s
	})
}

func TestNewIdempotencyStoreErrors(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	cases := []struct {
		name string
		rdb  redis.UniversalClient
		pre  string
		opts []IdempotencyOptions
		want string
	}{
		{"nil_client", nil, "p:", nil, "redisretry: nil Redis client"},
		{"empty_prefix", rdb, "", nil, "redisretry: empty idempotency store prefix"},
		{"two_options", rdb, "p:", []IdempotencyOptions{{}, {}}, "redisretry: 2 IdempotencyOptions given; want at most one"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := NewIdempotencyStore(c.rdb, c.pre, c.opts...)
			if s != nil || err == nil || err.Error() != c.want {
				t.Fatalf("NewIdempotencyStore = %v, %v; want nil, %q", s, err, c.want)
			}
		})
	}
}

// The records carry the TTLs the store was given, on Redis's own clock,
// under hashed key names in one hash tag; there is no store-wide key.
func TestIdempotencyStoreTTLs(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	s, prefix := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient, ReservationTTL: time.Hour})
	const key = "secret-key-1"
	rec, lock := recordKey(prefix, key), lockKey(prefix, key)

	r, err := s.Reserve(ctx, key, "fp", 30*time.Second)
	if err != nil || r.State != idempotency.StateReserved {
		t.Fatalf("Reserve = %+v, %v", r, err)
	}
	expectPTTL(t, rdb, lock, 30*time.Second)
	expectPTTL(t, rdb, rec, time.Hour)
	if got := rdb.Get(ctx, lock).Val(); got != fmt.Sprint(r.Token) {
		t.Fatalf("lock holds %q, want the token %d", got, r.Token)
	}

	resp := &idempotency.Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"id":1}`)}
	if err := s.Complete(ctx, key, r.Token, resp, 10*time.Minute); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	expectPTTL(t, rdb, rec, 10*time.Minute)
	if n := rdb.Exists(ctx, lock).Val(); n != 0 {
		t.Fatalf("lock still exists after Complete")
	}
	keys := rdb.Keys(ctx, prefix+"*").Val()
	var nonces []string
	for _, k := range keys {
		if strings.HasPrefix(k, prefix+"{"+hashed(key)+"}:n:") {
			nonces = append(nonces, k)
			// Remembered only as long as go-redis may send the call again.
			expectPTTL(t, rdb, k, patient+nonceGrace)
		}
	}
	if len(keys) != 3 || len(nonces) != 2 {
		t.Fatalf("keys under the prefix = %q, want the record and the nonces of Reserve and Complete", keys)
	}
	for _, k := range keys {
		if strings.Contains(k, key) {
			t.Fatalf("Redis key %q names the idempotency key", k)
		}
	}
	// Exactly what the Handler handed over, nothing more.
	if got := rdb.HGet(ctx, rec, "body").Val(); got != `{"id":1}` {
		t.Fatalf("stored body = %q", got)
	}
	if got := rdb.HLen(ctx, rec).Val(); got != 6 {
		t.Fatalf("record has %d fields, want 6 (st, fp, tok, status, hdr, body)", got)
	}
}

// A record's TTL near time.Duration(math.MaxInt64), a common "forever",
// does not overflow into 1ms, and one under a millisecond is sent as 1ms
// rather than PX 0, which Redis rejects.
func TestIdempotencyStoreTTLClampedBothWays(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	s, prefix := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient})
	const forever = time.Duration(math.MaxInt64)
	r, err := s.Reserve(ctx, "k", "fp", forever)
	if err != nil || r.State != idempotency.StateReserved {
		t.Fatalf("Reserve with lock TTL MaxInt64 = %+v, %v", r, err)
	}
	if err := s.Complete(ctx, "k", r.Token, &idempotency.Response{Status: 200}, forever); err != nil {
		t.Fatalf("Complete with TTL MaxInt64: %v", err)
	}
	// Read as milliseconds: go-redis's Duration of this PTTL overflows.
	if ttl, _ := rdb.Do(ctx, "PTTL", recordKey(prefix, "k")).Int64(); ttl < int64(290*365*24*time.Hour/time.Millisecond) {
		t.Fatalf("record PTTL = %v; want about 292 years", ttl)
	}
	if got, err := s.Reserve(ctx, "k", "fp", time.Minute); err != nil || got.State != idempotency.StateCompleted {
		t.Fatalf("Reserve after Complete = %+v, %v; want the recorded response", got, err)
	}
	r, err = s.Reserve(ctx, "short", "fp", time.Microsecond)
	if err != nil || r.State != idempotency.StateReserved {
		t.Fatalf("Reserve with lock TTL 1µs = %+v, %v; want reserved", r, err)
	}
}

// expectPTTL checks that key expires within ttl, and not more than a
// minute sooner (no loaded machine takes a minute between two calls).
func expectPTTL(t *testing.T, rdb *redis.Client, key string, ttl time.Duration) {
	t.Helper()
	got := rdb.PTTL(context.Background(), key).Val()
	if got > ttl || got < ttl-time.Minute {
		t.Fatalf("PTTL(%s) = %v, want at most %v", key, got, ttl)
	}
}

func TestIdempotencyStoreMaxResponseSize(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	s, _ := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient, MaxResponseSize: 10})
	r, err := s.Reserve(ctx, "k", "fp", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	big := &idempotency.Response{Status: 200, Body: []byte("01234567890")}
	if err := s.Complete(ctx, "k", r.Token, big, time.Minute); !errors.Is(err, idempotency.ErrStoreFull) {
		t.Fatalf("Complete of 11 bytes with a limit of 10: err = %v, want ErrStoreFull", err)
	}
	// The reservation is untouched: its owner can still release it.
	if err := s.Release(ctx, "k", r.Token); err != nil {
		t.Fatalf("Release after ErrStoreFull: %v", err)
	}
	if err := s.Complete(ctx, "k", 1, nil, time.Minute); err == nil {
		t.Fatal("Complete of a nil response: no error")
	}
	if _, err := s.Reserve(ctx, "k", "fp", 0); err == nil {
		t.Fatal("Reserve with lock TTL 0: no error")
	}
}

// A key under the prefix that holds other data: a clear error, and the
// Handler answers 503 without running the operation.
func TestIdempotencyStoreWrongType(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	s, prefix := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient})
	rdb.Set(ctx, recordKey(prefix, "str"), "not a hash", 0)
	rdb.HSet(ctx, recordKey(prefix, "badhash"), "st", "c", "fp", "fp", "status", "x", "hdr", "{}", "body", "")
	cases := []struct {
		name, key, want string
		handler         bool // the Handler gets as far as the record
	}{
		{"string_record", "str", "redisretry: idempotency reserve: a key under the store's prefix holds other data; give the store a prefix of its own: WRONGTYPE", true},
		{"malformed_record", "badhash", "redisretry: idempotency reserve: malformed record; give the store a prefix of its own", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.Reserve(ctx, c.key, "fp", time.Minute)
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Fatalf("Reserve: err = %v, want %q…", err, c.want)
			}
			if errors.Is(err, idempotency.ErrStaleToken) {
				t.Fatalf("a store failure reads as ErrStaleToken: %v", err)
			}
			if !c.handler {
				return
			}
			ran := 0
			h := idempotency.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran++ }), s, idempotency.Options{})
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, "/charge", strings.NewReader("{}"))
			req.Header.Set("Idempotency-Key", c.key)
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusServiceUnavailable || ran != 0 {
				t.Fatalf("Handler answered %d and ran the operation %d times, want 503 and 0", rec.Code, ran)
			}
		})
	}
}

// A killed redis-server: every method fails with a clear error, the
// Handler answers 503 without running the operation, and once Redis is
// back the store works again (empty: the server kept nothing).
func TestIdempotencyStoreKilledServer(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	defer rdb.Close()
	s, _ := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient})
	r, err := s.Reserve(ctx, "k", "fp", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	srv.Kill()

	if _, err := s.Reserve(ctx, "k2", "fp", time.Minute); err == nil || !strings.HasPrefix(err.Error(), "redisretry: idempotency reserve: ") {
		t.Fatalf("Reserve with Redis down: err = %v", err)
	}
	if err := s.Complete(ctx, "k", r.Token, &idempotency.Response{Status: 200}, time.Minute); err == nil ||
		errors.Is(err, idempotency.ErrStaleToken) || !strings.HasPrefix(err.Error(), "redisretry: idempotency complete: ") {
		t.Fatalf("Complete with Redis down: err = %v", err)
	}
	if err := s.Release(ctx, "k", r.Token); err == nil || errors.Is(err, idempotency.ErrStaleToken) {
		t.Fatalf("Release with Redis down: err = %v", err)
	}

	var ran, storeErrors atomic.Int32
	h := idempotency.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran.Add(1) }), s,
		idempotency.Options{OnEvent: func(e idempotency.Event) {
			if e.Kind == idempotency.KindStoreError {
				storeErrors.Add(1)
			}
		}})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/charge", strings.NewReader("{}"))
	req.Header.Set("Idempotency-Key", "k3")
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" || ran.Load() != 0 || storeErrors.Load() != 1 {
		t.Fatalf("Handler with Redis down: %d, Retry-After %q, ran %d, store errors %d; want 503, 1, 0, 1",
			rec.Code, rec.Header().Get("Retry-After"), ran.Load(), storeErrors.Load())
	}

	srv.Restart(t)
	if r, err := s.Reserve(ctx, "k", "fp", time.Minute); err != nil || r.State != idempotency.StateReserved {
		t.Fatalf("Reserve after the restart = %+v, %v; want reserved", r, err)
	}
}

// A Redis that accepts connections and never answers: each call ends with
// a clear error at CallTimeout, whatever deadline the caller has (the
// Handler records under a context without one).
func TestIdempotencyStoreHungServer(t *testing.T) {
	addr := hungServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer rdb.Close()
	s, _ := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: 50 * time.Millisecond})
	ctx := context.WithoutCancel(context.Background())
	_, errReserve := s.Reserve(ctx, "k", "fp", time.Minute)
	errs := map[string]error{
		"reserve":  errReserve,
		"complete": s.Complete(ctx, "k", 1, &idempotency.Response{Status: 200}, time.Minute),
		"release":  s.Release(ctx, "k", 1),
	}
	for op, err := range errs {
		want := "redisretry: idempotency " + op + ": no answer from Redis in time: "
		var ne net.Error
		if err == nil || !strings.HasPrefix(err.Error(), want) || !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("%s: err = %v, want a timeout saying %q", op, err, want)
		}
	}
}

// hungServer listens on loopback, accepts connections, reads and never
// answers; everything is closed when t ends.
func hungServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(io.Discard, c) })
		}
	})
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String()
}

// Two instances of a service, each with its own go-redis client, share the
// store: a retry that reaches the other instance is replayed the first
// response, a different payload under the key is refused, and an
// instance never runs an operation the other one holds.
func TestIdempotencyStoreTwoInstances(t *testing.T) {
	srv := redistest.Start(t)
	prefix := uniquePrefix(t)
	var charges atomic.Int32
	release := make(chan struct{})
	open := sync.OnceFunc(func() { close(release) })
	defer open()
	op := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := charges.Add(1)
		<-release
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"charge":%d}`, n)
	})
	var inst [2]http.Handler
	for i := range inst {
		s, err := NewIdempotencyStore(srv.Client(t), prefix, IdempotencyOptions{CallTimeout: patient})
		if err != nil {
			t.Fatal(err)
		}
		inst[i] = idempotency.Handler(op, s, idempotency.Options{})
	}
	post := func(h http.Handler, body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/charge", strings.NewReader(body))
		req.Header.Set("Idempotency-Key", "order-1")
		h.ServeHTTP(rec, req)
		return rec
	}

	first := make(chan *httptest.ResponseRecorder)
	go func() { first <- post(inst[0], `{"amount":5}`) }()
	// Instance 1 sees the key held by instance 0 until it finishes.
	for charges.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if rec := post(inst[1], `{"amount":5}`); rec.Code != http.StatusConflict || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("instance 1 while instance 0 runs: %d, Retry-After %q; want 409, 1", rec.Code, rec.Header().Get("Retry-After"))
	}
	open()
	got := <-first
	if got.Code != http.StatusCreated || got.Body.String() != `{"charge":1}` {
		t.Fatalf("instance 0: %d %q", got.Code, got.Body.String())
	}
	replay := post(inst[1], `{"amount":5}`)
	if replay.Code != http.StatusCreated || replay.Body.String() != `{"charge":1}` ||
		replay.Header().Get(idempotency.ReplayedHeader) != "true" || replay.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("instance 1 after: %d %q %v; want the replay of 201 {\"charge\":1}", replay.Code, replay.Body.String(), replay.Header())
	}
	if rec := post(inst[1], `{"amount":500}`); rec.Code != http.StatusUnprocessableEntity {
		t.Fatalf("instance 1, another payload under the key: %d, want 422", rec.Code)
	}
	if n := charges.Load(); n != 1 {
		t.Fatalf("charges = %d, want 1", n)
	}
}

// A Redis out of memory (maxmemory reached, noeviction): Reserve fails
// with an error that matches ErrStoreFull, and the Handler answers 503.
func TestIdempotencyStoreOutOfMemory(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	s, _ := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient})
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	_, err := s.Reserve(ctx, "k", "fp", time.Minute)
	want := "redisretry: idempotency reserve: idempotency: store full: OOM"
	if !errors.Is(err, idempotency.ErrStoreFull) || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("Reserve with Redis out of memory: err = %v, want ErrStoreFull, %q…", err, want)
	}
}

// A Redis that reaches maxmemory (noeviction) while an operation runs
// still records its response: the operation ran, and a key freed because
// the record did not fit would run it again on the client's retry.
func TestFullRedisNeverRunsAnOperationTwice(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, "--maxmemory-policy", "noeviction").Client(t)
	s, _ := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient})
	var charges atomic.Int32
	op := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := charges.Add(1)
		// Other traffic fills Redis while the charge runs.
		if err := rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
			t.Errorf("CONFIG SET maxmemory 1: %v", err)
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "charge %d", n)
	})
	h := idempotency.Handler(op, s, idempotency.Options{})
	post := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/charge", strings.NewReader(`{"amount":5}`))
		req.Header.Set("Idempotency-Key", "order-1")
		h.ServeHTTP(rec, req)
		return rec
	}
	if got := post(); got.Code != http.StatusCreated || got.Body.String() != "charge 1" {
		t.Fatalf("first: %d %q; want 201 \"charge 1\"", got.Code, got.Body.String())
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	got := post()
	if n := charges.Load(); n != 1 {
		t.Fatalf("charges = %d; want 1 (the retry answered %d %q)", n, got.Code, got.Body.String())
	}
	if got.Code != http.StatusCreated || got.Body.String() != "charge 1" || got.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d %q %v; want the replay of 201 \"charge 1\"", got.Code, got.Body.String(), got.Header())
	}
}

// Responses are replayed byte for byte: header values that are not UTF-8,
// empty values, repeated fields and binary bodies.
func TestIdempotencyStoreExactReplay(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	s, _ := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient})
	want := &idempotency.Response{
		Status: 201,
		Header: http.Header{
			"X-Latin1": {"caf\xe9", "\xff\x00\x01"},
			"X-Empty":  {""},
			"X-None":   {},
			"Link":     {"<a>; rel=next", "<b>; rel=prev"},
		},
		Body: []byte{0, 0xff, 'o', 'k', '\r', '\n'},
	}
	r, err := s.Reserve(ctx, "k", "fp", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, "k", r.Token, want, time.Minute); err != nil {
		t.Fatal(err)
	}
	got, err := s.Reserve(ctx, "k", "fp", time.Minute)
	if err != nil || got.State != idempotency.StateCompleted {
		t.Fatalf("Reserve = %+v, %v; want completed", got, err)
	}
	if got.Response.Status != want.Status || string(got.Response.Body) != string(want.Body) ||
		fmt.Sprintf("%q", got.Response.Header) != fmt.Sprintf("%q", want.Header) {
		t.Fatalf("replayed %d %q %q, want %d %q %q", got.Response.Status, got.Response.Header, got.Response.Body,
			want.Status, want.Header, want.Body)
	}
}

func TestDecodeHeader(t *testing.T) {
	h := http.Header{"A": {"1", "\xff"}, "B": {}}
	enc := string(encodeHeader(h))
	if got, ok := decodeHeader(enc); !ok || fmt.Sprintf("%q", got) != fmt.Sprintf("%q", h) {
		t.Fatalf("decodeHeader(encodeHeader(%q)) = %q, %v", h, got, ok)
	}
	if got, ok := decodeHeader(""); !ok || got != nil {
		t.Fatalf(`decodeHeader("") = %q, %v; want nil, true`, got, ok)
	}
	bad := map[string]string{
		"name_too_long":   "\x05ab",
		"no_count":        "\x01A",
		"count_too_large": "\x01A\x09\x011",
		"value_too_long":  "\x01A\x01\x09xy",
		"bad_uvarint":     "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",
		"truncated_value": enc[:len(enc)-1],
	}
	for name, in := range bad {
		if got, ok := decodeHeader(in); ok {
			t.Errorf("%s: decodeHeader(%q) = %q, true; want false", name, in, got)
		}
	}
}

// A Reserve for a caller already gone sends nothing: a reservation no one
// reads would lock the key for the lock TTL.
func TestReserveWithEndedContextSendsNothing(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	s, prefix := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient})
	var c counter
	rdb.AddHook(&c)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Reserve(ctx, "k", "fp", time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("Reserve with an ended context: err = %v; want context.Canceled", err)
	}
	if n := c.n.Load(); n != 0 {
		t.Fatalf("commands sent = %d; want 0", n)
	}
	if keys := rdb.Keys(context.Background(), prefix+"*").Val(); len(keys) != 0 {
		t.Fatalf("keys written: %q", keys)
	}
}
