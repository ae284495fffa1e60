// Command minio runs minio-go (v7) over httpretry against a local fake of
// an S3 endpoint, uploading an object larger than httpretry buffers by
// default.
//
// minio-go retries by itself (10 attempts by default): Options.MaxRetries
// = 1 makes it send each request once. Its default transport sets
// DisableCompression (so that objects stored gzip-encoded come back as
// stored), timeouts and pool sizes: pass minio.DefaultTransport as
// httpretry's Base to keep them.
//
// PutObject sends the object as a request body without GetBody. httpretry
// buffers such a body to send it again only up to BufferRequest (1 MiB by
// default); a larger upload that fails stops as body_not_rewindable and
// the caller gets the error. For uploads, raise BufferRequest to the
// largest object sent in one request (memory: one copy per upload in
// flight), or keep httpretry off the upload path and let minio retry,
// since minio rewinds the io.Seeker it was given.
//
//	go run ./minio
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/examples/sdks/internal/fake"
)

// objectSize is over httpretry's default BufferRequest of 1 MiB and under
// minio's 16 MiB part size, so the object goes up in one PUT.
const objectSize = 2 << 20

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "minio:", err)
		os.Exit(1)
	}
}

// newTransport is the retry layer over minio's own transport defaults;
// bufferRequest is httpretry's BufferRequest.
func newTransport(bufferRequest int64) (*httpretry.Transport, error) {
	base, err := minio.DefaultTransport(false)
	if err != nil {
		return nil, err
	}
	return &httpretry.Transport{
		Base:          base,
		Timeout:       time.Minute,
		BufferRequest: bufferRequest,
	}, nil
}

// newClient returns a minio client for the S3 endpoint at rawURL that
// sends through tr and does not retry by itself.
func newClient(rawURL string, tr http.RoundTripper) (*minio.Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	return minio.New(u.Host, &minio.Options{
		Creds:        credentials.NewStaticV4("AKIAFAKE", "fake-secret", ""),
		Transport:    tr,
		Region:       "us-east-1", // known: no bucket-location lookup first
		BucketLookup: minio.BucketLookupPath,
		MaxRetries:   1, // one attempt per request: httpretry is the only retry layer
	})
}

// upload puts an object of objectSize bytes.
func upload(ctx context.Context, mc *minio.Client, data []byte) (minio.UploadInfo, error) {
	return mc.PutObject(ctx, "backups", "db.dump", bytes.NewReader(data), int64(len(data)),
		minio.PutObjectOptions{ContentType: "application/octet-stream"})
}

func run(w io.Writer) error {
	data := bytes.Repeat([]byte("0123456789abcdef"), objectSize/16)
	for _, buffer := range []int64{0, 4 << 20} {
		if err := uploadOnce(w, buffer, data); err != nil {
			return err
		}
	}
	return nil
}

// uploadOnce uploads data to a fresh fake whose first answer is 503, with
// httpretry's BufferRequest set to buffer, and reports what happened.
func uploadOnce(w io.Writer, buffer int64, data []byte) error {
	srv := fake.NewServer(slowDownOnce)
	defer srv.Close()
	tr, err := newTransport(buffer)
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()
	var o httpretry.Outcome
	tr.OnDone = func(_ *http.Request, got httpretry.Outcome) { o = got }
	mc, err := newClient(srv.URL, tr)
	if err != nil {
		return err
	}
	info, err := upload(context.Background(), mc, data)
	fmt.Fprintf(w, "BufferRequest %d: %d requests, %s", buffer, srv.Hits(), o.Reason)
	if err != nil {
		fmt.Fprintf(w, ", error: %s\n", minio.ToErrorResponse(err).Code)
		return nil
	}
	fmt.Fprintf(w, ", uploaded %d bytes, etag %s\n", info.Size, info.ETag)
	return nil
}

// slowDownOnce answers every odd request with S3's 503 SlowDown and every
// even one as a successful PUT.
func slowDownOnce(w http.ResponseWriter, r *http.Request, hit int) {
	if hit%2 == 1 {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+
			`<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message>`+
			`<Resource>%s</Resource><RequestId>fake</RequestId></Error>`, r.URL.Path)
		return
	}
	w.Header().Set("ETag", `"fake-etag"`)
	w.WriteHeader(http.StatusOK)
}
