package idempotency

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// KeyHeader is the request header that carries an idempotency key, as the
// IETF "The Idempotency-Key HTTP Header Field" draft defines it.
const KeyHeader = "Idempotency-Key"

// xKeyHeader is an older spelling some clients send (net/http and the
// httpretry client treat it as a key too).
const xKeyHeader = "X-Idempotency-Key"

// errNoKey reports a request without a key.
var errNoKey = errors.New("idempotency: no Idempotency-Key")

// requestKey returns the request's idempotency key. The draft defines the
// field as a Structured Field String (RFC 8941 §3.3.3), so a quoted value
// is unquoted; a bare value is accepted as it is, since many clients send
// one. A key must be a single field value of 1 to maxLen visible ASCII
// characters (spaces allowed inside quotes).
func requestKey(h http.Header, maxLen int) (string, error) {
	vals := append(h.Values(KeyHeader), h.Values(xKeyHeader)...)
	switch len(vals) {
	case 0:
		return "", errNoKey
	case 1:
	default:
		// The draft: clients MUST NOT send more than one.
		return "", errors.New("idempotency: more than one Idempotency-Key")
	}
	v := strings.Trim(vals[0], " \t")
	key, err := parseKey(v)
	if err != nil {
		return "", err
	}
	if key == "" {
		return "", errors.New("idempotency: empty Idempotency-Key")
	}
	if len(key) > maxLen {
		return "", fmt.Errorf("idempotency: Idempotency-Key longer than %d characters", maxLen)
	}
	return key, nil
}

// parseKey unquotes an sf-string, or checks a bare value.
func parseKey(v string) (string, error) {
	if strings.HasPrefix(v, `"`) {
		return unquote(v)
	}
	for i := 0; i < len(v); i++ {
		// Visible ASCII, but not the characters that would make the value
		// a list or a broken string.
		if c := v[i]; c <= ' ' || c >= 0x7f || c == ',' || c == '"' || c == '\\' {
			return "", errKeyCharacter
		}
	}
	return v, nil
}

// errKeyCharacter rejects a key with a byte outside its alphabet.
var errKeyCharacter = errors.New("idempotency: Idempotency-Key has a character outside visible ASCII")

// unquote parses v, which starts with a quote, as an sf-string (RFC 8941
// §4.2.5): printable ASCII, with backslash escaping only a quote or a
// backslash, and nothing after the closing quote.
func unquote(v string) (string, error) {
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			i++
			if i == len(v) || (v[i] != '"' && v[i] != '\\') {
				return "", errors.New("idempotency: Idempotency-Key has a bad escape")
			}
			b.WriteByte(v[i])
		case c == '"':
			if i != len(v)-1 {
				return "", errors.New("idempotency: Idempotency-Key has text after its closing quote")
			}
			return b.String(), nil
		case c < ' ' || c >= 0x7f:
			return "", errKeyCharacter
		default:
			b.WriteByte(c)
		}
	}
	return "", errors.New("idempotency: Idempotency-Key lacks its closing quote")
}

// scopedKey combines a scope and a key into the key a Store sees. A key
// never contains NUL, so the last NUL separates the two unambiguously.
func scopedKey(scope, key string) string {
	if scope == "" {
		return key
	}
	return scope + "\x00" + key
}
