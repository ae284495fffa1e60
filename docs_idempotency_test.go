package httpretry

import (
	"os"
	"strings"
	"testing"
)

// redisFencingRule is how the Redis IdempotencyStore issues a key's
// fencing token, as contrib/redisretry/fencing.go states it beside the
// script that computes it.
const redisFencingRule = "token = max(last + 1, now)"

// TestIdempotencyDocStatesTheRedisFencingRule keeps docs/idempotency.md's
// account of the Redis store's fencing tokens true: they grow per key,
// from the key's last token and Redis's clock (the rule stated in
// contrib/redisretry/fencing.go), and no store-wide INCR'd counter issues
// them.
func TestIdempotencyDocStatesTheRedisFencingRule(t *testing.T) {
	doc, err := os.ReadFile("docs/idempotency.md")
	if err != nil {
		t.Fatal(err)
	}
	code, err := os.ReadFile("contrib/redisretry/fencing.go")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(doc)), " ")
	if !strings.Contains(string(code), redisFencingRule) {
		t.Fatalf("contrib/redisretry/fencing.go no longer states %q: change docs/idempotency.md and this test with it", redisFencingRule)
	}
	if !strings.Contains(text, "`"+redisFencingRule+"`") {
		t.Errorf("docs/idempotency.md does not state the Redis store's fencing rule %q", redisFencingRule)
	}
	for _, stale := range []string{"INCR", "one counter", "store-wide counter issues"} {
		if strings.Contains(text, stale) {
			t.Errorf("docs/idempotency.md says %q; the Redis store's tokens come from %s, per key", stale, redisFencingRule)
		}
	}
}
