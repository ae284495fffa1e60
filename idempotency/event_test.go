package idempotency_test

import (
	"regexp"
	"testing"

	"github.com/httpretry/httpretry/idempotency"
)

func TestKindsAreDistinctMetricLabels(t *testing.T) {
	label := regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)
	seen := map[idempotency.Kind]bool{}
	for _, k := range idempotency.Kinds() {
		if !label.MatchString(string(k)) {
			t.Errorf("kind %q is not a snake_case label", k)
		}
		if seen[k] {
			t.Errorf("kind %q listed twice", k)
		}
		seen[k] = true
	}
	if len(seen) != 12 {
		t.Fatalf("Kinds() has %d kinds, want 12", len(seen))
	}
}
