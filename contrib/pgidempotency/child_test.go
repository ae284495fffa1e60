package pgidempotency

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/pgidempotency/internal/pgtest"
	"github.com/httpretry/httpretry/idempotency"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The crash tests run the payment handler in a child process (this test
// binary again, with childEnv set to where it stops), which the test
// kills with SIGKILL while it is stopped there.
const (
	childEnv    = "PGIDEMPOTENCY_TEST_CHILD"
	childDSNEnv = "PGIDEMPOTENCY_TEST_CHILD_DSN"
	childLock   = time.Second
)

// serveChild is the child's main: a TxHandler over the charge handler,
// on a free loopback port it prints ("LISTEN addr"), that stops forever
// before or after its COMMIT, saying so ("STOPPED").
func serveChild() int {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv(childDSNEnv))
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	s, err := New(pool, Options{})
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	stop := func() {
		fmt.Println("STOPPED")
		select {} // until killed
	}
	cs := &countedStore{Store: s}
	switch os.Getenv(childEnv) {
	case "before_commit":
		cs.beforeCommit = stop
	case "after_commit":
		cs.afterCommit = stop
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	fmt.Println("LISTEN", ln.Addr())
	_ = http.Serve(ln, idempotency.TxHandler(http.HandlerFunc(chargeHandler), cs, idempotency.Options{LockTTL: childLock}))
	return 1
}

// child is a serving process started by startChild.
type child struct {
	cmd   *exec.Cmd
	addr  string
	lines chan string
}

// startChild starts this test binary as a child serving database db,
// stopping at stopAt ("before_commit" or "after_commit").
func startChild(t *testing.T, db, stopAt string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+stopAt, childDSNEnv+"="+pgtest.DSN(server.Port, db))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 16)}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	line := c.expect(t, "LISTEN ")
	c.addr = "http://" + strings.TrimPrefix(line, "LISTEN ")
	return c
}

// expect waits for the child's next line, which must start with prefix.
func (c *child) expect(t *testing.T, prefix string) string {
	t.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok || !strings.HasPrefix(line, prefix) {
			t.Fatalf("child said %q (open %v), want %q…", line, ok, prefix)
		}
		return line
	case <-time.After(60 * time.Second):
		t.Fatalf("child never said %q", prefix)
	}
	return ""
}

// TestTxProcessKilledBeforeCommitLeavesNothing: the serving process is
// killed (SIGKILL) after the handler wrote its charge and the response's
// record in its transaction, before COMMIT. The database rolls the
// transaction back: no charge, no record; once the lease expired the key
// is free, and the retry runs the handler (a takeover) and charges once.
func TestTxProcessKilledBeforeCommitLeavesNothing(t *testing.T) {
	f := newFixture(t, Options{}, false)
	c := startChild(t, f.db, "before_commit")
	o := order{ID: "o-kill-before", Amount: 42}
	go tryPost(context.Background(), c.addr, "k-kill", o)
	c.expect(t, "STOPPED")
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = c.cmd.Wait()
	waitFor(t, 10*time.Second, "the killed transaction's charge stayed", func() bool { return f.charges(o.ID) == 0 })
	if _, done := f.records(); done != 0 {
		t.Fatalf("%d completed records after a kill before COMMIT", done)
	}
	var mu sync.Mutex
	var events []idempotency.Kind
	srv := f.serve(chargeHandler, idempotency.Options{LockTTL: childLock, OnEvent: func(e idempotency.Event) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e.Kind)
	}})
	var a answer
	waitFor(t, 20*time.Second, "the key never became free", func() bool {
		a = post(t, srv.URL, "k-kill", o)
		return a.status != http.StatusConflict
	})
	if a.status != http.StatusCreated || a.header.Get(idempotency.ReplayedHeader) != "" {
		t.Fatalf("retry after the lease answered %d %v %q, want a new run's 201", a.status, a.header, a.body)
	}
	mu.Lock()
	defer mu.Unlock()
	if !containsKind(events, idempotency.KindTakeover) {
		t.Fatalf("events %v: the retry did not take over the dead process's reservation", events)
	}
	if got := f.charges(o.ID); got != 1 {
		t.Fatalf("charges = %d, want 1", got)
	}
}

// TestTxProcessKilledAfterCommitReplaysTheResponse: the serving process
// is killed (SIGKILL) after COMMIT, before its response reached the
// client. The retry, on another instance, gets the recorded response
// byte for byte — the charge's own id in body and header — and no second
// charge.
func TestTxProcessKilledAfterCommitReplaysTheResponse(t *testing.T) {
	f := newFixture(t, Options{}, false)
	c := startChild(t, f.db, "after_commit")
	o := order{ID: "o-kill-after", Amount: 43}
	lost := make(chan error, 1)
	go func() { _, err := tryPost(context.Background(), c.addr, "k-kill", o); lost <- err }()
	c.expect(t, "STOPPED")
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = c.cmd.Wait()
	if err := <-lost; err == nil {
		t.Fatal("the client got an answer from a process killed before sending it")
	}
	var id int64
	if err := f.direct.QueryRow(t.Context(), "SELECT id FROM charges WHERE order_id = $1", o.ID).Scan(&id); err != nil {
		t.Fatalf("the committed charge: %v", err)
	}
	srv := f.serve(chargeHandler, idempotency.Options{LockTTL: childLock})
	a := post(t, srv.URL, "k-kill", o)
	want := fmt.Sprintf(`{"order":%q,"charge":%d,"amount":%d}`, o.ID, id, o.Amount)
	if a.status != http.StatusCreated || string(a.body) != want || a.header.Get("X-Charge-Id") != fmt.Sprint(id) ||
		a.header.Get("Content-Type") != "application/json" || a.header.Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("replay = %d %v %q, want 201 %s replayed", a.status, a.header, a.body, want)
	}
	if got := f.charges(o.ID); got != 1 {
		t.Fatalf("charges = %d, want 1", got)
	}
}

func containsKind(ks []idempotency.Kind, k idempotency.Kind) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}
