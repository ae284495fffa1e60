package main

import (
	"bytes"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// sections runs the demo and splits its output by scenario, keyed by the
// scenario's name ("(a)" … "(e)").
func sections(t *testing.T) map[string][]string {
	t.Helper()
	var buf bytes.Buffer
	if err := run(&buf); err != nil {
		t.Fatalf("run: %v", err)
	}
	out := make(map[string][]string)
	var cur string
	for _, line := range strings.Split(buf.String(), "\n") {
		if name, ok := strings.CutPrefix(line, "== "); ok {
			cur, _, _ = strings.Cut(name, " ")
			continue
		}
		if cur != "" && strings.TrimSpace(line) != "" {
			out[cur] = append(out[cur], strings.TrimSpace(line))
		}
	}
	if len(out) != len(scenarios) {
		t.Fatalf("got %d scenarios in the output, want %d:\n%s", len(out), len(scenarios), buf.String())
	}
	return out
}

// count returns how many lines start with prefix.
func count(lines []string, prefix string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// find returns the first line that starts with prefix.
func find(t *testing.T, lines []string, prefix string) string {
	t.Helper()
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	t.Fatalf("no line starting with %q in:\n%s", prefix, strings.Join(lines, "\n"))
	return ""
}

func TestRun(t *testing.T) {
	got := sections(t)
	tests := []struct {
		name       string
		outcome    string // prefix of the outcome line
		result     string // prefix of the result line
		attempts   int    // server: and client: lines
		slogRetry  int    // "httpretry: retry" records
		slogStop   string // reason of the "httpretry: stop" record, "" for none
		sameKeys   bool   // every attempt carried the same Idempotency-Key
		noKeyAtAll bool   // no attempt carried an Idempotency-Key
	}{
		{
			name: "(a)", outcome: "outcome: attempts=3 reason=final status=200",
			result: `result: 200 OK, body "ok"`, attempts: 3, slogRetry: 2, noKeyAtAll: true,
		},
		{
			name: "(b)", outcome: "outcome: attempts=3 reason=attempts_exhausted status=503",
			result: "result: 503 Service Unavailable", attempts: 3, slogRetry: 2,
			slogStop: "attempts_exhausted", noKeyAtAll: true,
		},
		{
			name: "(c)", outcome: "outcome: attempts=1 reason=retry_after_exceeds_deadline status=503 waited=0s",
			result: "result: 503 Service Unavailable", attempts: 1,
			slogStop: "retry_after_exceeds_deadline", noKeyAtAll: true,
		},
		{
			name: "(d)", outcome: "outcome: attempts=1 reason=not_idempotent status=503 waited=0s",
			result: "result: 503 Service Unavailable", attempts: 1,
			slogStop: "not_idempotent", noKeyAtAll: true,
		},
		{
			name: "(e)", outcome: "outcome: attempts=3 reason=final status=201",
			result: `result: 201 Created, body "order created"`, attempts: 3, slogRetry: 2, sameKeys: true,
		},
	}
	keyRE := regexp.MustCompile(`Idempotency-Key=(\S+)`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lines := got[tt.name]
			find(t, lines, tt.outcome)
			find(t, lines, tt.result)
			if n := count(lines, "server:"); n != tt.attempts {
				t.Errorf("server saw %d requests, want %d", n, tt.attempts)
			}
			if n := count(lines, "client: attempt"); n != tt.attempts {
				t.Errorf("OnAttempt reported %d attempts, want %d", n, tt.attempts)
			}
			// Every attempt but the last announces its wait.
			if n := count(lines, "client: attempt") - countContaining(lines, "no further attempt"); n != tt.attempts-1 {
				t.Errorf("%d attempts announced a wait, want %d", n, tt.attempts-1)
			}
			if n := countContaining(lines, `msg="httpretry: retry"`); n != tt.slogRetry {
				t.Errorf("logged %d retries, want %d", n, tt.slogRetry)
			}
			stops := countContaining(lines, `msg="httpretry: stop"`)
			switch {
			case tt.slogStop == "" && stops != 0:
				t.Errorf("logged %d stops, want none", stops)
			case tt.slogStop != "" && countContaining(lines, "reason="+tt.slogStop) < 2:
				// The stop record and the outcome line both name it.
				t.Errorf("no stop record with reason %s", tt.slogStop)
			}

			var keys []string
			for _, l := range lines {
				if strings.HasPrefix(l, "server:") {
					keys = append(keys, keyRE.FindStringSubmatch(l)[1])
				}
			}
			for i, k := range keys {
				switch {
				case tt.noKeyAtAll && k != "(none)":
					t.Errorf("request %d carried key %q, want none", i+1, k)
				case tt.sameKeys && (k == "(none)" || len(k) != 36):
					t.Errorf("request %d carried key %q, want a UUID", i+1, k)
				case tt.sameKeys && k != keys[0]:
					t.Errorf("request %d carried key %q, want %q as on the first", i+1, k, keys[0])
				}
			}
		})
	}
}

func countContaining(lines []string, s string) int {
	n := 0
	for _, l := range lines {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// TestRunLeavesNoGoroutines checks that run closes its server and its
// connections: the goroutine count returns to where it was.
func TestRunLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	var buf bytes.Buffer
	if err := run(&buf); err != nil {
		t.Fatalf("run: %v", err)
	}
	// Connection goroutines exit asynchronously after their sockets close.
	deadline := time.Now().Add(2 * time.Second)
	for {
		after := runtime.NumGoroutine()
		if after <= before {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			n := runtime.Stack(buf, true)
			t.Fatalf("goroutines: got %d after run, want at most %d\n%s", after, before, buf[:n])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRunIsFast(t *testing.T) {
	start := time.Now()
	if err := run(&bytes.Buffer{}); err != nil {
		t.Fatalf("run: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("run took %s, want under 3s", d)
	}
}
