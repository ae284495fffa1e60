package main

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/minio/minio-go/v7"
	"go.uber.org/goleak"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/examples/sdks/internal/fake"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	var buf bytes.Buffer
	if err := run(&buf); err != nil {
		t.Fatalf("run: %v", err)
	}
	want := `BufferRequest 0: 1 requests, body_not_rewindable, error: SlowDown
BufferRequest 4194304: 2 requests, final, uploaded 2097152 bytes, etag fake-etag
`
	if got := buf.String(); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
}

// A 2 MiB PutObject that meets a 503: with the default BufferRequest the
// body cannot be sent again; with a bound above the object it is, byte for
// byte.
func TestPutObjectOverBufferRequest(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), objectSize/16)
	tests := []struct {
		name       string
		buffer     int64
		wantHits   int
		wantReason httpretry.StopReason
	}{
		{"default 1 MiB", 0, 1, httpretry.BodyNotRewindable},
		{"raised to 4 MiB", 4 << 20, 2, httpretry.Final},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := fake.NewServer(slowDownOnce)
			defer srv.Close()
			tr, err := newTransport(tt.buffer)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.CloseIdleConnections()
			var o httpretry.Outcome
			tr.OnDone = func(_ *http.Request, got httpretry.Outcome) { o = got }
			mc, err := newClient(srv.URL, tr)
			if err != nil {
				t.Fatal(err)
			}

			info, err := upload(context.Background(), mc, data)
			if o.Reason != tt.wantReason {
				t.Errorf("stop reason = %s, want %s", o.Reason, tt.wantReason)
			}
			reqs := srv.Requests()
			if len(reqs) != tt.wantHits {
				t.Fatalf("server hits = %d, want %d", len(reqs), tt.wantHits)
			}
			for _, r := range reqs {
				if r.Method != http.MethodPut || r.Path != "/backups/db.dump" {
					t.Errorf("request = %s %s, want PUT /backups/db.dump", r.Method, r.Path)
				}
				// The body may be aws-chunked with signatures; the payload
				// is in it, and it is the same on every attempt.
				if len(r.Body) < objectSize || !bytes.Contains(r.Body, data[:4096]) {
					t.Errorf("request body of %d bytes does not carry the object", len(r.Body))
				}
			}
			if !fake.SameBodies(reqs) {
				t.Errorf("request bodies differ across attempts")
			}
			if tt.wantReason != httpretry.Final {
				if code := minio.ToErrorResponse(err).Code; code != "SlowDown" {
					t.Errorf("PutObject error = %v, want the SlowDown error", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("PutObject: %v", err)
			}
			if info.Size != objectSize || info.ETag != "fake-etag" {
				t.Errorf("upload info = size %d, etag %q; want %d, fake-etag", info.Size, info.ETag, objectSize)
			}
		})
	}
}
