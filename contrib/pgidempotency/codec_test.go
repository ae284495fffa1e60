package pgidempotency

import (
	"errors"
	"net/http"
	"reflect"
	"testing"
)

// TestHeaderEncodingKeepsBytesAndRejectsCorruption: a header round-trips
// byte for byte, values that are not UTF-8 and empty values included, and
// a stored header this package could not have written is a clear error,
// never a panic or a huge allocation.
func TestHeaderEncodingKeepsBytesAndRejectsCorruption(t *testing.T) {
	h := http.Header{
		"Content-Type":     {"application/json"},
		"X-Raw":            {"\xff\xfe not utf-8", ""},
		"Trailer:X-Digest": {"sha-256=abc"},
		"Empty":            {},
	}
	b, err := encodeHeader(h)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, h) {
		t.Fatalf("round trip = %#v, want %#v", got, h)
	}
	corrupt := map[string][]byte{
		"truncated":       b[:len(b)-3],
		"trailing_bytes":  append(append([]byte{}, b...), 0),
		"huge_count":      {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
		"huge_string_len": {1, 0xff, 0xff, 0xff, 0x0f},
		"bad_varint":      {0x80},
	}
	for name, b := range corrupt {
		t.Run(name, func(t *testing.T) {
			if _, err := decodeHeader(b); !errors.Is(err, errCorruptHeader) {
				t.Fatalf("decodeHeader = %v, want errCorruptHeader", err)
			}
		})
	}
	if h, err := decodeHeader([]byte{0}); err != nil || len(h) != 0 {
		t.Fatalf("an empty header = %v, %v", h, err)
	}
}

// TestDecodeResponseRejectsRecordsNoHandlerMade: a completed record
// without a status, or with one outside 100–999, is an error.
func TestDecodeResponseRejectsRecordsNoHandlerMade(t *testing.T) {
	empty, _ := encodeHeader(nil)
	for _, st := range []*int32{nil, ptr(int32(0)), ptr(int32(1000))} {
		if _, err := decodeResponse(st, empty, nil); err == nil {
			t.Fatalf("status %v accepted", st)
		}
	}
	r, err := decodeResponse(ptr(int32(201)), empty, nil)
	if err != nil || r.Status != 201 || r.Body == nil {
		t.Fatalf("decodeResponse = %+v, %v; want 201 with an empty, non-nil body", r, err)
	}
}

func ptr[T any](v T) *T { return &v }
