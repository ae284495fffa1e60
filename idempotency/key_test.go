package idempotency

import (
	"net/http"
	"strings"
	"testing"
)

func TestRequestKey(t *testing.T) {
	cases := []struct {
		name    string
		header  http.Header
		want    string
		wantErr bool
	}{
		{"bare", http.Header{"Idempotency-Key": {"8e03978e-40d5-43"}}, "8e03978e-40d5-43", false},
		{"sf_string", http.Header{"Idempotency-Key": {`"8e03978e-40d5"`}}, "8e03978e-40d5", false},
		{"sf_string_escapes", http.Header{"Idempotency-Key": {`"a \"b\" \\c"`}}, `a "b" \c`, false},
		{"trimmed", http.Header{"Idempotency-Key": {"  k1\t"}}, "k1", false},
		{"x_spelling", http.Header{"X-Idempotency-Key": {"k2"}}, "k2", false},
		{"at_max_length", http.Header{"Idempotency-Key": {strings.Repeat("a", 16)}}, strings.Repeat("a", 16), false},
		{"over_max_length", http.Header{"Idempotency-Key": {strings.Repeat("a", 17)}}, "", true},
		{"quoted_over_max_length", http.Header{"Idempotency-Key": {`"` + strings.Repeat("a", 17) + `"`}}, "", true},
		{"empty_value", http.Header{"Idempotency-Key": {""}}, "", true},
		{"empty_string", http.Header{"Idempotency-Key": {`""`}}, "", true},
		{"two_values", http.Header{"Idempotency-Key": {"a", "a"}}, "", true},
		{"both_spellings", http.Header{"Idempotency-Key": {"a"}, "X-Idempotency-Key": {"a"}}, "", true},
		{"lone_quote", http.Header{"Idempotency-Key": {`"`}}, "", true},
		{"trailing_backslash", http.Header{"Idempotency-Key": {`"a\`}}, "", true},
		{"control_in_string", http.Header{"Idempotency-Key": {"\"a\x01\""}}, "", true},
		{"nul_bare", http.Header{"Idempotency-Key": {"a\x00b"}}, "", true},
		{"utf8", http.Header{"Idempotency-Key": {"ключ"}}, "", true},
		{"utf8_quoted", http.Header{"Idempotency-Key": {`"ключ"`}}, "", true},
		{"comma", http.Header{"Idempotency-Key": {"a,b"}}, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := requestKey(tc.header, 16)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("requestKey = %q, %v; want %q, error %v", got, err, tc.want, tc.wantErr)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "idempotency: ") {
				t.Fatalf("error %q lacks the package prefix", err)
			}
		})
	}
	if _, err := requestKey(http.Header{}, 16); err != errNoKey {
		t.Fatalf("no header: err = %v, want errNoKey", err)
	}
}

func TestScopedKey(t *testing.T) {
	if got := scopedKey("", "k"); got != "k" {
		t.Fatalf("no scope: %q", got)
	}
	// Scopes and keys cannot be shifted into one another.
	if scopedKey("a", "bc") == scopedKey("ab", "c") {
		t.Fatal("scopedKey(a, bc) == scopedKey(ab, c)")
	}
}

func FuzzRequestKey(f *testing.F) {
	for _, s := range []string{"k", `"k"`, `"a\"b"`, `"`, `\`, "", "a b", `"a`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		key, err := requestKey(http.Header{"Idempotency-Key": {v}}, 255)
		if err != nil {
			return
		}
		if key == "" || len(key) > 255 || strings.ContainsAny(key, "\x00\r\n") {
			t.Fatalf("requestKey(%q) = %q: accepted a key it must refuse", v, key)
		}
		for i := 0; i < len(key); i++ {
			if key[i] < ' ' || key[i] >= 0x7f {
				t.Fatalf("requestKey(%q) = %q: non-printable byte", v, key)
			}
		}
	})
}
