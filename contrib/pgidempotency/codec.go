package pgidempotency

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"sort"

	"github.com/httpretry/httpretry/idempotency"
)

// errCorruptHeader is returned for a stored header this package could not
// have written.
var errCorruptHeader = errors.New("pgidempotency: corrupt stored header")

// encodeHeader writes h as bytes: the number of fields, then each name
// and its values, each a uvarint length and the bytes. Values are kept as
// the bytes they are (JSON would replace bytes that are not UTF-8), and
// names in sorted order, so that one header always gives one encoding.
func encodeHeader(h http.Header) ([]byte, error) {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	b := binary.AppendUvarint(nil, uint64(len(names)))
	for _, k := range names {
		b = appendString(b, k)
		b = binary.AppendUvarint(b, uint64(len(h[k])))
		for _, v := range h[k] {
			b = appendString(b, v)
		}
	}
	return b, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// decodeHeader reads what encodeHeader wrote.
func decodeHeader(b []byte) (http.Header, error) {
	d := decoder{b: b}
	n := d.count()
	h := make(http.Header, min(n, 64))
	for i := uint64(0); i < n && d.err == nil; i++ {
		k := d.string()
		nv := d.count()
		vs := make([]string, 0, min(nv, 16))
		for j := uint64(0); j < nv && d.err == nil; j++ {
			vs = append(vs, d.string())
		}
		h[k] = vs
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = errCorruptHeader
	}
	return h, d.err
}

// decoder reads uvarint-prefixed fields, failing on the first that does
// not fit in what is left.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) count() uint64 {
	if d.err != nil {
		return 0
	}
	n, k := binary.Uvarint(d.b)
	if k <= 0 || n > uint64(len(d.b)) {
		d.err = errCorruptHeader
		return 0
	}
	d.b = d.b[k:]
	return n
}

func (d *decoder) string() string {
	n := d.count()
	if d.err != nil || n > uint64(len(d.b)) {
		d.err = errCorruptHeader
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// decodeResponse is a completed record's response.
func decodeResponse(status *int32, header, body []byte) (*idempotency.Response, error) {
	if status == nil {
		return nil, errors.New("pgidempotency: a completed record without a status")
	}
	h, err := decodeHeader(header)
	if err != nil {
		return nil, err
	}
	if body == nil {
		body = []byte{}
	}
	if *status < 100 || *status > 999 {
		return nil, fmt.Errorf("pgidempotency: a completed record with status %d", *status)
	}
	return &idempotency.Response{Status: int(*status), Header: h, Body: body}, nil
}
