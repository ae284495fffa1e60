package httpretry

import (
	"bytes"
	"io"
	"net/http"
)

// bufferable reports whether an attempt's response body is read as part
// of the attempt: BufferResponse is on, the request is safe to repeat (a
// body that fails midway is then retried), and the response has a body
// that is not a protocol switch.
func (op *operation) bufferable(req *http.Request, resp *http.Response) bool {
	return op.t.BufferResponse > 0 && op.idempotent &&
		req.Method != http.MethodHead &&
		resp.StatusCode != http.StatusSwitchingProtocols &&
		resp.Body != http.NoBody
}

// bufferResponse reads resp's body, up to limit bytes, within the
// attempt's time, so that an attempt means a complete, usable response
// rather than headers alone. It reports whether the body is now held in
// memory; on a read error it closes the body and returns the error, which
// the caller treats as the attempt's failure.
//
// A body longer than limit, known from ContentLength or found while
// reading, is left streaming: the bytes already read are put back in
// front of the rest, so nothing is lost. Memory held per response never
// exceeds limit bytes.
func bufferResponse(resp *http.Response, limit int64) (buffered bool, err error) {
	if resp.ContentLength > limit {
		return false, nil
	}
	body := resp.Body
	buf, err := readAtMost(body, resp.ContentLength, limit)
	if err != nil {
		body.Close()
		return false, err
	}
	if int64(len(buf)) == limit && resp.ContentLength < 0 {
		// The body may go on: one more byte tells.
		var one [1]byte
		n, err := io.ReadFull(body, one[:])
		switch {
		case n == 1:
			resp.Body = &prefixedBody{
				Reader: io.MultiReader(bytes.NewReader(buf), bytes.NewReader(one[:]), body),
				body:   body,
			}
			return false, nil
		case err != io.EOF:
			body.Close()
			return false, err
		}
	}
	body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(buf))
	resp.ContentLength = int64(len(buf))
	return true, nil
}

// readAtMost reads r to EOF into a buffer of at most limit bytes; hint is
// the body's ContentLength (at most limit), or negative when unknown. A
// body that reaches limit is returned without error, for the caller to
// probe.
func readAtMost(r io.Reader, hint, limit int64) ([]byte, error) {
	if hint >= 0 {
		buf := make([]byte, hint)
		if _, err := io.ReadFull(r, buf); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF // a body shorter than announced
			}
			return nil, err
		}
		return buf, nil
	}
	buf := make([]byte, 0, min(512, limit))
	for int64(len(buf)) < limit {
		if len(buf) == cap(buf) {
			// Grow by doubling, never beyond limit.
			grown := make([]byte, len(buf), min(2*int64(cap(buf)), limit))
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
	return buf, nil
}

// prefixedBody streams the bytes already read, then the rest of the body.
type prefixedBody struct {
	io.Reader
	body io.ReadCloser
}

func (b *prefixedBody) Close() error { return b.body.Close() }
