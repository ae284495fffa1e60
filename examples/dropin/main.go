// Command dropin shows the one-line way to add httpretry to an existing
// [http.Client]: wrap whatever Transport the client already has.
//
//	client.Transport = &httpretry.Transport{Base: client.Transport}
//
// Nothing else in the application changes. The client keeps its Timeout,
// which now bounds the whole operation, retries and waits included; the
// Transport's zero value gives three attempts with jittered backoff. A
// local test server fails the first request with 503, so the second
// attempt succeeds, and [httpretry.WithOutcome] shows what happened.
//
//	go run ./examples/dropin
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"time"

	"github.com/httpretry/httpretry"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "dropin:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	// A server that fails once, then answers.
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
			http.Error(rw, "try again", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(rw, "hello from a server that failed once")
	}))
	defer srv.Close()

	// The client the application already has...
	client := &http.Client{Timeout: 2 * time.Second}
	// ...and the one line that gives it retries.
	client.Transport = &httpretry.Transport{Base: client.Transport}
	defer client.CloseIdleConnections()

	var o httpretry.Outcome
	ctx := httpretry.WithOutcome(context.Background(), &o)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "status: %s\n", resp.Status)
	fmt.Fprintf(w, "body: %s\n", body)
	fmt.Fprintf(w, "server saw %d requests\n", requests.Load())
	fmt.Fprintf(w, "outcome: attempts=%d reason=%s waited=%s\n", o.Attempts, o.Reason, o.Waited.Round(time.Millisecond))
	return nil
}
