package throttle

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
	// Limit is how many requests the quota admits per window, when the
	// headers say (RateLimit-Policy's q, the dictionary form's limit,
	// RateLimit-Limit or X-RateLimit-Limit); 0 when they do not.
	Limit int64
	// Window is the length of the quota's window, RateLimit-Policy's w;
	// 0 when not said.
	Window time.Duration
	// Name names the quota among a destination's several: the RateLimit
	// policy's name, or X-RateLimit-Resource (GitHub's), else
	// X-RateLimit-Bucket (Discord's); "" when unnamed. A name longer than
	// 64 bytes is not kept.
	Name string
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
	// maxQuotaName is the longest quota name kept.
	maxQuotaName = 64
)

// ParseRateLimit returns the quota a response's headers announce, and
// whether they announce one. It reads, in this order, the first that is
// present and valid:
//
//   - RateLimit, the structured list of draft-ietf-httpapi-ratelimit-headers
//     (`"default";r=0;t=30`): r is the remaining quota and t the seconds
//     until it resets. Every field line is read, as one list (RFC 9110
//     §5.3). Of several policies, the one with the least remaining
//     counts (the longest reset among those with the same); a member
//     without a valid r is skipped. A parameter given twice takes its
//     last value (RFC 9651 §4.2.3.2); a quoted name, or a String
//     parameter, may hold escaped quotes, commas and semicolons. A policy
//     without t takes the window w of the RateLimit-Policy member of the
//     same name, when there is one, as its reset; that member's q and w
//     give Limit and Window. The earlier
//     drafts' dictionary form (`limit=100, remaining=0, reset=30`) is read
//     too, when the field's first member is a key=value pair.
//   - RateLimit-Remaining with RateLimit-Reset (and RateLimit-Limit), the
//     earlier drafts' separate fields.
//   - X-RateLimit-Remaining with X-RateLimit-Reset-After or
//     X-RateLimit-Reset (and X-RateLimit-Limit, X-RateLimit-Resource or
//     X-RateLimit-Bucket), the common unofficial fields.
//   - X-Rate-Limit-Remaining with X-Rate-Limit-Reset (and
//     X-Rate-Limit-Limit), Okta's and X's spelling.
//
// A reset is in seconds, and every reset field (RateLimit's t, the
// dictionary's reset, RateLimit-Reset, X-RateLimit-Reset-After,
// X-RateLimit-Reset, X-Rate-Limit-Reset) follows one rule: a value of
// 10⁹ or more (10⁹ seconds is over 31 years as a delay; GitLab, Twitch,
// GitHub, Okta and Discord send Unix times) is a Unix time, turned into
// a delay against the response's Date header when valid, else against
// now; a time in the past gives a reset of 0. (A 429's Retry-After then
// bounds a spent quota's reset: see Throttle.) The separate fields'
// numbers may carry a decimal fraction (Reddit's "598.0", Discord's
// "64.57"): counts are rounded down.
//
// Numbers are non-negative decimal numbers of at most 15 digits before
// any fraction (the RateLimit field's, integers); a sign or anything else
// makes the value invalid. A reset longer
// than a day is clamped to a day. A missing or invalid remaining gives
// (RateLimit{}, false); a missing or invalid reset gives HasReset false.
// ParseRateLimit reads no clock: now is the time the response arrived.
func ParseRateLimit(h http.Header, now time.Time) (RateLimit, bool) {
	set := parseRateLimits(h, now)
	return set.rl[0], set.n > 0
}

// rateLimits is every quota one response announces, each applying to the
// request it answers: at most maxQuotaNames, one per name, the one
// ParseRateLimit returns first, then the others by the same order.
type rateLimits struct {
	n  int
	rl [maxQuotaNames]RateLimit
}

// oneRateLimit returns the set of rl alone.
func oneRateLimit(rl RateLimit) rateLimits {
	return rateLimits{n: 1, rl: [maxQuotaNames]RateLimit{rl}}
}

// tighter reports whether the quota a binds before b: less remaining, or
// as much for longer.
func tighter(a, b RateLimit) bool {
	return a.Remaining < b.Remaining || (a.Remaining == b.Remaining && a.Reset > b.Reset)
}

// add adds p to the set: in its place by tighter, after those as tight;
// of two of the same name, the tighter is kept; past maxQuotaNames, the
// least tight is dropped.
func (s *rateLimits) add(p RateLimit) {
	for i := range s.n {
		if s.rl[i].Name == p.Name {
			if !tighter(p, s.rl[i]) {
				return
			}
			copy(s.rl[i:], s.rl[i+1:s.n])
			s.n--
			break
		}
	}
	i := s.n
	if i == len(s.rl) {
		if !tighter(p, s.rl[i-1]) {
			return
		}
		i--
	} else {
		s.n++
	}
	for ; i > 0 && tighter(p, s.rl[i-1]); i-- {
		s.rl[i] = s.rl[i-1]
	}
	s.rl[i] = p
}

// parseRateLimits reads every quota h announces, as ParseRateLimit
// describes.
func parseRateLimits(h http.Header, now time.Time) rateLimits {
	if set := parseRateLimitField(h["Ratelimit"], h["Ratelimit-Policy"], h, now); set.n > 0 {
		return set
	}
	if rl, ok := parseRateLimitPair(h, draftFields, now); ok {
		return oneRateLimit(rl)
	}
	if rl, ok := parseRateLimitPair(h, xFields, now); ok {
		return oneRateLimit(rl)
	}
	if rl, ok := parseRateLimitPair(h, xDashFields, now); ok {
		return oneRateLimit(rl)
	}
	return rateLimits{}
}

// hasRateLimitFields reports whether h holds a field that may announce
// a quota (see parseRateLimits), without reading it.
func hasRateLimitFields(h http.Header) bool {
	return len(h["Ratelimit"]) > 0 || len(h[draftFields.remaining]) > 0 || len(h[xFields.remaining]) > 0 ||
		len(h[xDashFields.remaining]) > 0
}

// rateLimitFields names the separate fields of one form: resetAfter, when
// the form has one, is a delay in seconds read before reset; bucket names
// the quota when resource does not.
type rateLimitFields struct {
	remaining, reset, resetAfter, limit, resource, bucket string
}

// The separate fields' forms, in the order they are read: the earlier
// drafts' (GitLab's and Twitch's, whose reset is a Unix time), the common
// X- dialect (GitHub's; Discord's with its Reset-After; Reddit's with
// float counts), and the X-Rate-Limit- one (Okta's, X's).
var (
	draftFields = rateLimitFields{"Ratelimit-Remaining", "Ratelimit-Reset", "", "Ratelimit-Limit", "", ""}
	xFields     = rateLimitFields{"X-Ratelimit-Remaining", "X-Ratelimit-Reset", "X-Ratelimit-Reset-After", "X-Ratelimit-Limit",
		"X-Ratelimit-Resource", "X-Ratelimit-Bucket"}
	xDashFields = rateLimitFields{"X-Rate-Limit-Remaining", "X-Rate-Limit-Reset", "", "X-Rate-Limit-Limit", "", ""}
)

// parseRateLimitPair reads a form's separate fields. Counts may carry a
// decimal fraction ("598.0"), rounded down; a reset may too ("64.57",
// "1470173023.123").
func parseRateLimitPair(h http.Header, f rateLimitFields, now time.Time) (RateLimit, bool) {
	n, _, ok := headerDecimal(h, f.remaining)
	if !ok {
		return RateLimit{}, false
	}
	rl := RateLimit{Remaining: n}
	if secs, ns, ok := headerDecimal(h, f.resetAfter); ok && f.resetAfter != "" {
		rl.Reset, rl.HasReset = resetDelay(secs, ns, h, now), true
	} else if secs, ns, ok := headerDecimal(h, f.reset); ok {
		rl.Reset, rl.HasReset = resetDelay(secs, ns, h, now), true
	}
	rl.Limit, _, _ = headerDecimal(h, f.limit)
	rl.Name = quotaField(h, f.resource)
	if rl.Name == "" {
		rl.Name = quotaField(h, f.bucket)
	}
	return rl, true
}

// headerDecimal reads the first line of field name as a non-negative
// decimal number: its whole part, at most 15 digits, and its fraction in
// nanoseconds of a unit (digits past the ninth dropped).
func headerDecimal(h http.Header, name string) (whole, nanos int64, ok bool) {
	v := h[name]
	if name == "" || len(v) == 0 {
		return 0, 0, false
	}
	w, frac, hasFrac := strings.Cut(strings.Trim(v[0], " \t"), ".")
	whole, ok = parseSFInteger(w)
	if !ok || (hasFrac && frac == "") {
		return 0, 0, false
	}
	scale := int64(time.Second)
	for i := 0; i < len(frac); i++ {
		c := frac[i]
		if c < '0' || c > '9' {
			return 0, 0, false
		}
		if scale >= 10 {
			scale /= 10
			nanos += int64(c-'0') * scale
		}
	}
	return whole, nanos, true
}

// quotaField returns the quota name field name gives, "" when absent or
// too long.
func quotaField(h http.Header, name string) string {
	if v := h[name]; name != "" && len(v) > 0 {
		return quotaName(strings.Trim(v[0], " \t"))
	}
	return ""
}

// quotaName returns name when it is short enough to keep, else "".
func quotaName(name string) string {
	if len(name) > maxQuotaName {
		return ""
	}
	return name
}

// resetDelay turns a reset of secs seconds and nanos nanoseconds into a
// delay, clamped to maxRateLimitReset. Every reset field follows this
// one rule: a value of epochThreshold or more is a Unix time, measured
// from the response's Date when valid (so that a server whose clock is
// skewed from ours still gets the delay it meant), else now; a time in
// the past is a delay of 0.
func resetDelay(secs, nanos int64, h http.Header, now time.Time) time.Duration {
	if secs >= epochThreshold {
		if date, err := http.ParseTime(h.Get("Date")); err == nil {
			now = date
		}
		// Sub saturates; secs ≤ maxSFInteger is far inside time.Time.
		return min(max(time.Unix(secs, nanos).Sub(now), 0), maxRateLimitReset)
	}
	if secs >= int64(maxRateLimitReset/time.Second) {
		return maxRateLimitReset
	}
	return time.Duration(secs)*time.Second + time.Duration(nanos)
}

// parseRateLimitField reads the RateLimit field's lines: the structured
// list of policies, or the earlier dictionary form.
func parseRateLimitField(lines, policies []string, h http.Header, now time.Time) rateLimits {
	var set rateLimits
	for i, m := range listMembers(lines) {
		if i == 0 && isDictMember(m) {
			// The earlier drafts' dictionary: "remaining=0, reset=30"
			// or "limit=100, remaining=0, reset=30".
			if rl, ok := parseRateLimitDict(lines, h, now); ok {
				return oneRateLimit(rl)
			}
			return set
		}
		if p, ok := policyQuota(m, policies, h, now); ok {
			set.add(p)
		}
	}
	return set
}

// isDictMember reports whether a list member is a key=value pair of the
// earlier dictionary form, not a policy: a token cannot hold "=".
func isDictMember(m string) bool {
	item, _, _ := strings.Cut(m, ";")
	return !strings.HasPrefix(m, `"`) && strings.Contains(item, "=")
}

// policyQuota reads one RateLimit member: its r, and its t or else the
// window w of the RateLimit-Policy member of the same name, whose q and w
// give Limit and Window. ok is false for a member without a valid r.
func policyQuota(m string, policies []string, h http.Header, now time.Time) (RateLimit, bool) {
	name, params := sfItem(m)
	r, ok := sfParam(params, "r")
	if !ok {
		return RateLimit{}, false
	}
	q, w := policyLimits(policies, name)
	rl := RateLimit{Remaining: r, Name: quotaName(name), Limit: q, Window: windowLength(w)}
	if t, ok := sfParam(params, "t"); ok {
		rl.Reset, rl.HasReset = resetDelay(t, 0, h, now), true
	} else if w > 0 {
		rl.Reset, rl.HasReset = rl.Window, true
	}
	return rl, true
}

// windowLength returns a policy window of w seconds, clamped to
// maxRateLimitReset: a length, never a time.
func windowLength(w int64) time.Duration {
	return time.Duration(min(w, int64(maxRateLimitReset/time.Second))) * time.Second
}

// parseRateLimitDict reads the earlier drafts' RateLimit dictionary
// (limit=N, remaining=N, reset=S) over every field line.
func parseRateLimitDict(lines []string, h http.Header, now time.Time) (RateLimit, bool) {
	var rl RateLimit
	found := false
	for _, m := range listMembers(lines) {
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
			rl.Reset, rl.HasReset = resetDelay(n, 0, h, now), true
		case "limit":
			rl.Limit = n
		}
	}
	if !found {
		return RateLimit{}, false
	}
	return rl, true
}

// policyLimits returns the quota q and the window w, in seconds, of the
// RateLimit-Policy member named name; 0 for what it does not say.
func policyLimits(fields []string, name string) (q, w int64) {
	for _, m := range listMembers(fields) {
		if n, params := sfItem(m); n == name {
			q, _ = sfParam(params, "q")
			w, _ = sfParam(params, "w")
			return q, w
		}
	}
	return 0, 0
}

// listMembers yields the members of a list field split over several
// field lines, as one list (RFC 9110 §5.3), at most maxRateLimitItems.
func listMembers(lines []string) func(yield func(int, string) bool) {
	return func(yield func(int, string) bool) {
		n := 0
		for _, v := range lines {
			for m := range splitMembers(v) {
				if n == maxRateLimitItems || !yield(n, m) {
					return
				}
				n++
			}
		}
	}
}

// splitMembers yields the comma-separated members of a list, trimmed.
func splitMembers(v string) func(yield func(string) bool) {
	return splitOutsideStrings(v, ',')
}

// splitOutsideStrings yields the parts of v between the separators sep,
// trimmed and not empty, ignoring a sep inside a quoted string: a String
// runs from a quote to the next quote not escaped by a backslash (RFC
// 9651 §3.3.3).
func splitOutsideStrings(v string, sep byte) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		start, quoted := 0, false
		for i := 0; i <= len(v); i++ {
			if i < len(v) {
				c := v[i]
				if c == '"' {
					quoted = !quoted
					continue
				}
				if c == '\\' && quoted {
					i++
					continue
				}
				if c != sep || quoted {
					continue
				}
			}
			if m := strings.Trim(v[start:min(i, len(v))], " \t"); m != "" && !yield(m) {
				return
			}
			start = i + 1
		}
	}
}

// sfItem splits a list member into its bare item (a quoted string's
// content, or a token as it is) and its parameters (";k=v;k2=v2").
func sfItem(m string) (name, params string) {
	if strings.HasPrefix(m, `"`) {
		// The string ends at the first quote not escaped (RFC 9651
		// §3.3.3); the name keeps its escapes, as both fields spell it.
		for i := 1; i < len(m); i++ {
			switch m[i] {
			case '\\':
				i++
			case '"':
				return m[1:i], m[i+1:]
			}
		}
		return "", ""
	}
	name, params, _ = strings.Cut(m, ";")
	return strings.Trim(name, " \t"), ";" + params
}

// sfParam returns the Integer value of the parameter key in params. A
// parameter given twice takes its last value (RFC 9651 §4.2.3.2), even
// when that one is not an Integer; a ";" inside a String value does not
// end it.
func sfParam(params, key string) (n int64, ok bool) {
	for p := range splitOutsideStrings(params, ';') {
		k, v, _ := strings.Cut(p, "=")
		if k == key {
			// A bare key is Boolean true: not an Integer.
			n, ok = parseSFInteger(v)
		}
	}
	return n, ok
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
