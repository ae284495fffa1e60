package idempotency

import (
	"net/http"
	"slices"
	"strings"
)

// unstoredHeaders are the response fields a replay must not repeat:
// hop-by-hop fields (RFC 9110 §7.6.1), cookies (a session is not an
// operation's result), and fields net/http computes for each response.
// Trailers are recorded, under keys prefixed with [http.TrailerPrefix];
// the Trailer field that declares them is rebuilt from those keys.
var unstoredHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true,
	"Transfer-Encoding": true, "Te": true, "Trailer": true, "Upgrade": true,
	"Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Set-Cookie": true, "Date": true, "Content-Length": true,
	RecordedHeader: true, ReplayedHeader: true,
}

// recordedHeader returns the fields of a response to record: the headers
// that went out (sent) that the wrapped handler set, and the trailers it
// set by the time it returned (final, the header map then).
//
// A header still holding the value it had before the handler ran (outer)
// was set by an outer layer for this request — a request ID, CORS — and
// is left out: a replay keeps what outer layers set for the replaying
// request. Hop-by-hop and per-response fields are left out too (see
// unstoredHeaders), with any that Connection names.
//
// Field names are compared without regard to case, as clients read them:
// a handler may put a key in its header map as it likes ("set-cookie"),
// and net/http sends it as it is.
func recordedHeader(sent, final, outer http.Header) http.Header {
	out := make(http.Header, len(sent))
	for k, vs := range sent {
		if unstoredHeaders[http.CanonicalHeaderKey(k)] || strings.HasPrefix(k, http.TrailerPrefix) || slices.Equal(vs, outer[k]) {
			continue
		}
		out[k] = slices.Clone(vs)
	}
	dropConnectionFields(out, sent.Values("Connection"))
	for _, name := range declaredTrailers(sent) {
		delete(out, name) // a trailer, not a header
		if vs := final[name]; len(vs) > 0 && name != RecordedHeader {
			out[http.TrailerPrefix+name] = slices.Clone(vs)
		}
	}
	for k, vs := range final {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok && http.CanonicalHeaderKey(name) != RecordedHeader {
			out[k] = slices.Clone(vs)
		}
	}
	return out
}

// dropConnectionFields deletes from h the fields that the Connection
// values name: hop-by-hop too (RFC 9110 §7.6.1).
func dropConnectionFields(h http.Header, connection []string) {
	for _, v := range connection {
		for name := range strings.SplitSeq(v, ",") {
			name = strings.TrimSpace(name)
			for k := range h {
				if strings.EqualFold(k, name) {
					delete(h, k)
				}
			}
		}
	}
}

// declaredTrailers returns the canonical names the Trailer field of h
// declares.
func declaredTrailers(h http.Header) []string {
	var names []string
	for _, v := range h["Trailer"] {
		for name := range strings.SplitSeq(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				names = append(names, http.CanonicalHeaderKey(name))
			}
		}
	}
	return names
}

// declareTrailers puts h's trailers in the form a replay sends them: every
// value under a key prefixed with [http.TrailerPrefix] (net/http sends
// those as trailers even without a declaration), and a Trailer field that
// declares exactly those, in order, without a Content-Length: a declared
// length would keep net/http from sending trailers over HTTP/1.1, which
// needs the chunked coding for them. A response sent this way and its
// replays carry the same fields.
func declareTrailers(h http.Header) {
	for _, name := range declaredTrailers(h) {
		if vs, ok := h[name]; ok {
			h[http.TrailerPrefix+name] = vs
			delete(h, name)
		}
	}
	var names []string
	for k := range h {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			names = append(names, http.CanonicalHeaderKey(name))
		}
	}
	if len(names) == 0 {
		delete(h, "Trailer")
		return
	}
	slices.Sort(names)
	h["Trailer"] = []string{strings.Join(names, ", ")}
	delete(h, "Content-Length")
}

// hasTrailers reports whether a recorded header holds trailers.
func hasTrailers(h http.Header) bool {
	for k := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			return true
		}
	}
	return false
}
