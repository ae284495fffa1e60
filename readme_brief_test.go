package httpretry

import (
	"math"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The README states the rules in brief; docs/rules.md states them in full.
// These tests hold the brief version to the code, so that the two cannot
// drift apart.

// readmeBullet returns the text of the README's bullet that starts with
// **name**:, up to the next bullet or blank line.
func readmeBullet(t *testing.T, name string) string {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "- **"+name+"**:")
	if !ok {
		t.Fatalf("README.md has no %q bullet in its rules in brief", name)
	}
	end := len(rest)
	for _, stop := range []string{"\n- ", "\n\n"} {
		if i := strings.Index(rest, stop); i >= 0 && i < end {
			end = i
		}
	}
	return strings.Join(strings.Fields(rest[:end]), " ")
}

// TestReadmeBriefTransientStatuses: the statuses the README's brief calls
// transient are those IsTransient retries without any header (the 409
// that needs Retry-After aside).
func TestReadmeBriefTransientStatuses(t *testing.T) {
	t.Parallel()
	text, _, ok := strings.Cut(readmeBullet(t, "Transient"), "a 409")
	if !ok {
		t.Fatalf("the README's Transient bullet no longer mentions the 409: %s", text)
	}
	var listed []int
	for _, m := range regexp.MustCompile(`\b[1-5]\d\d\b`).FindAllString(text, -1) {
		n, _ := strconv.Atoi(m)
		listed = append(listed, n)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
	for status := 100; status <= 599; status++ {
		if status == http.StatusConflict {
			continue
		}
		resp := &http.Response{StatusCode: status, Header: http.Header{}, Request: req}
		if got, want := IsTransient(resp, nil), slices.Contains(listed, status); got != want {
			t.Errorf("status %d: IsTransient = %v; the README's brief says %v (it lists %v)", status, got, want, listed)
		}
	}
}

// TestReadmeBriefSafeMethods: the methods the README's brief calls safe
// to repeat are those IsIdempotent accepts without a key or a mark.
func TestReadmeBriefSafeMethods(t *testing.T) {
	t.Parallel()
	text := readmeBullet(t, "Safe to repeat")
	listed := regexp.MustCompile(`\b[A-Z]{3,7}\b`).FindAllString(text, -1)
	methods := []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace}
	for _, m := range methods {
		req, _ := http.NewRequest(m, "http://127.0.0.1/", nil)
		if got, want := IsIdempotent(req), slices.Contains(listed, m); got != want {
			t.Errorf("%s: IsIdempotent = %v; the README's brief says %v (it lists %v)", m, got, want, listed)
		}
	}
}

// TestReadmeBriefDefaults: the README's brief table gives MaxAttempts's
// default as DefaultMaxAttempts, and the budget's as the one a Transport
// makes for itself: a bucket of that capacity, refilled by that much per
// operation.
func TestReadmeBriefDefaults(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if row := "| `MaxAttempts` | " + strconv.Itoa(DefaultMaxAttempts) + " |"; !strings.Contains(string(readme), row) {
		t.Errorf("README.md lacks the row %q", row)
	}
	m := regexp.MustCompile("\\| `Budget` \\| `NewTokenBucket\\(([0-9.]+), ([0-9.]+)\\)`").FindStringSubmatch(string(readme))
	if m == nil {
		t.Fatal("README.md: the Budget row no longer names NewTokenBucket(capacity, perRequest)")
	}
	capacity, _ := strconv.ParseFloat(m[1], 64)
	perRequest, _ := strconv.ParseFloat(m[2], 64)
	b, ok := (&Transport{}).EffectiveBudget().(*TokenBucket)
	if !ok {
		t.Fatalf("a zero Transport's budget is %T; the README says a TokenBucket from NewTokenBucket", (&Transport{}).EffectiveBudget())
	}
	if got := b.Tokens(); got != capacity {
		t.Errorf("a zero Transport's budget starts with %v tokens; the README says %v", got, capacity)
	}
	for b.Withdraw(t.Context()) {
	}
	for range 10 {
		b.Deposit()
	}
	if got, want := b.Tokens(), 10*perRequest; math.Abs(got-want) > 1e-6 {
		t.Errorf("ten operations add %v tokens to a zero Transport's budget; the README's perRequest %v makes %v", got, perRequest, want)
	}
}
