package httpretry

import (
	"net/http"
	"strings"
	"time"
)

// RateLimit is what a response says of its destination's quota.
type RateLimit struct {
	// Remaining is how many more requests the quota admits in the
	// current window; 0 means it is spent.
	Remaining int64
	// Reset is how long until the window resets and the quota is
	// restored, when HasReset.
	Reset    time.Duration
	HasReset bool
}

// Bounds on what ParseRateLimit reads: a header is a server's hint, not
// a reason to spend unbounded time or to trust a value past these.
const (
	// maxRateLimitItems is how many list members of RateLimit or
	// RateLimit-Policy are read; the rest are ignored.
	maxRateLimitItems = 16
	// maxRateLimitReset is the longest reset believed; a longer one is
	// clamped to it.
	maxRateLimitReset = 24 * time.Hour
	// epochThreshold separates a reset given as a delay in seconds from
	// one given as a Unix time in seconds: 10⁹ seconds is about 31.7
	// years as a delay, and September 2001 as a time.
	epochThreshold = 1_000_000_000
	// maxSFInteger is the largest Structured Field Integer (RFC 9651
	// §3.3.1: at most 15 digits).
	maxSFInteger = 999_999_999_999_999
)

// ParseRateLimit returns the quota a response's headers announce, and
// whether they announce one. It reads, in this order, the first that is
// present and valid:
//
//   - RateLimit, the structured list of draft-ietf-httpapi-ratelimit-headers
//     (`"default";r=0;t=30`): r is the remaining quota and t the seconds
//     until it resets. Of several policies, the one with the least
//     remaining counts (the longest reset among those with the same). A
//     policy without t takes the window w of the RateLimit-Policy member
//     of the same name, when there is one, as its reset. The earlier
//     drafts' dictionary form (`limit=100, remaining=0, reset=30`) is read
//     too.
//   - RateLimit-Remaining with RateLimit-Reset, the earlier drafts'
//     separate fields (the reset in seconds).
//   - X-RateLimit-Remaining with X-RateLimit-Reset, the common unofficial
//     pair. The reset is in seconds; a value of 10⁹ or more is a Unix
//     time in seconds (10⁹ seconds is over 31 years as a delay), turned
//     into a delay against the response's Date header when valid, else
//     against now; a time in the past gives a reset of 0.
//
// Numbers are non-negative decimal integers of at most 15 digits; a sign,
// a fraction or anything else makes the value invalid. A reset longer
// than a day is clamped to a day. A missing or invalid remaining gives
// (RateLimit{}, false); a missing or invalid reset gives HasReset false.
// ParseRateLimit reads no clock: now is the time the response arrived.
func ParseRateLimit(h http.Header, now time.Time) (RateLimit, bool) {
	if v := h["Ratelimit"]; len(v) > 0 {
		if rl, ok := parseRateLimitField(v[0], h["Ratelimit-Policy"]); ok {
			return rl, true
		}
	}
	if rl, ok := parseRateLimitPair(h, "Ratelimit-Remaining", "Ratelimit-Reset", now, false); ok {
		return rl, true
	}
	return parseRateLimitPair(h, "X-Ratelimit-Remaining", "X-Ratelimit-Reset", now, true)
}

// parseRateLimitPair reads a remaining field and a reset field; with
// epoch, a reset of epochThreshold or more is a Unix time.
func parseRateLimitPair(h http.Header, remaining, reset string, now time.Time, epoch bool) (RateLimit, bool) {
	rv := h[remaining]
	if len(rv) == 0 {
		return RateLimit{}, false
	}
	n, ok := parseSFInteger(strings.Trim(rv[0], " \t"))
	if !ok {
		return RateLimit{}, false
	}
	rl := RateLimit{Remaining: n}
	if v := h[reset]; len(v) > 0 {
		if secs, ok := parseSFInteger(strings.Trim(v[0], " \t")); ok {
			rl.Reset, rl.HasReset = resetDelay(secs, h, now, epoch), true
		}
	}
	return rl, true
}

// resetDelay turns a reset in seconds into a delay, clamped to
// maxRateLimitReset; with epoch, a value of epochThreshold or more is a
// Unix time, measured from the response's Date when valid, else now.
func resetDelay(secs int64, h http.Header, now time.Time, epoch bool) time.Duration {
	if epoch && secs >= epochThreshold {
		if date, err := http.ParseTime(h.Get("Date")); err == nil {
			now = date
		}
		// Sub saturates; secs ≤ maxSFInteger is far inside time.Time.
		return min(max(time.Unix(secs, 0).Sub(now), 0), maxRateLimitReset)
	}
	if secs >= int64(maxRateLimitReset/time.Second) {
		return maxRateLimitReset
	}
	return time.Duration(secs) * time.Second
}

// parseRateLimitField reads the RateLimit field: the structured list of
// policies, or the earlier dictionary form.
func parseRateLimitField(v string, policies []string) (RateLimit, bool) {
	var (
		rl    RateLimit
		found bool
	)
	for i, m := range splitMembers(v) {
		if i == maxRateLimitItems {
			break
		}
		name, params := sfItem(m)
		r, ok := sfParam(params, "r")
		if !ok {
			// The earlier drafts' dictionary: "remaining=0, reset=30"
			// or "limit=100, remaining=0, reset=30".
			return parseRateLimitDict(v)
		}
		t, hasT := sfParam(params, "t")
		var reset time.Duration
		if hasT {
			reset = resetDelay(t, nil, time.Time{}, false)
		} else if w, ok := policyWindow(policies, name); ok {
			reset, hasT = resetDelay(w, nil, time.Time{}, false), true
		}
		if !found || r < rl.Remaining || (r == rl.Remaining && reset > rl.Reset) {
			rl = RateLimit{Remaining: r, Reset: reset, HasReset: hasT}
			found = true
		}
	}
	return rl, found
}

// parseRateLimitDict reads the earlier drafts' RateLimit dictionary
// (remaining=N, reset=S).
func parseRateLimitDict(v string) (RateLimit, bool) {
	var rl RateLimit
	found := false
	for i, m := range splitMembers(v) {
		if i == maxRateLimitItems {
			break
		}
		key, val, ok := strings.Cut(m, "=")
		if !ok {
			continue
		}
		n, ok := parseSFInteger(strings.Trim(val, " \t"))
		if !ok {
			continue
		}
		switch strings.Trim(key, " \t") {
		case "remaining":
			rl.Remaining, found = n, true
		case "reset":
			rl.Reset, rl.HasReset = resetDelay(n, nil, time.Time{}, false), true
		}
	}
	return rl, found
}

// policyWindow returns the window w, in seconds, of the RateLimit-Policy
// member named name.
func policyWindow(fields []string, name string) (int64, bool) {
	for _, f := range fields {
		for i, m := range splitMembers(f) {
			if i == maxRateLimitItems {
				break
			}
			if n, params := sfItem(m); n == name {
				return sfParam(params, "w")
			}
		}
	}
	return 0, false
}

// splitMembers yields the comma-separated members of a list, trimmed,
// ignoring commas inside quoted strings.
func splitMembers(v string) func(yield func(int, string) bool) {
	return func(yield func(int, string) bool) {
		n, start, quoted := 0, 0, false
		for i := 0; i <= len(v); i++ {
			if i < len(v) {
				switch c := v[i]; {
				case c == '"':
					quoted = !quoted
					continue
				case c == '\\' && quoted:
					i++
					continue
				case c != ',' || quoted:
					continue
				}
			}
			if m := strings.Trim(v[start:min(i, len(v))], " \t"); m != "" {
				if !yield(n, m) {
					return
				}
				n++
			}
			start = i + 1
		}
	}
}

// sfItem splits a list member into its bare item (a quoted string's
// content, or a token as it is) and its parameters (";k=v;k2=v2").
func sfItem(m string) (name, params string) {
	if strings.HasPrefix(m, `"`) {
		end := strings.IndexByte(m[1:], '"')
		if end < 0 {
			return "", ""
		}
		return m[1 : 1+end], m[2+end:]
	}
	name, params, _ = strings.Cut(m, ";")
	return strings.Trim(name, " \t"), ";" + params
}

// sfParam returns the Integer value of the parameter key in params.
func sfParam(params, key string) (int64, bool) {
	for p := range strings.SplitSeq(params, ";") {
		k, v, ok := strings.Cut(strings.Trim(p, " \t"), "=")
		if ok && k == key {
			return parseSFInteger(v)
		}
	}
	return 0, false
}

// parseSFInteger parses a non-negative decimal integer of at most 15
// digits, as a Structured Field Integer is bounded (RFC 9651 §3.3.1).
func parseSFInteger(v string) (int64, bool) {
	if v == "" || len(v) > 15 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}
