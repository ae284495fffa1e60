package fake

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/httpretry/httpretry"
)

// IdleTimeoutWorks reports whether the httpretry this module builds
// against enforces [httpretry.Transport.IdleTimeout]: a body that stalls
// after its headers fails with [httpretry.ErrIdleTimeout]. It probes once
// per process against a loopback server, in at most about a second.
//
// Tests of streams under IdleTimeout skip when it reports false, so that
// the examples stay green on a library build that declares the field but
// does not act on it yet. Once every build supports it, tests should call
// it no more: then a regression fails instead of skipping.
var IdleTimeoutWorks = sync.OnceValue(probeIdleTimeout)

func probeIdleTimeout() bool {
	srv := NewServer(func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("Content-Length", "2")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("x"))
		w.(http.Flusher).Flush()
		Hang(r)
	})
	defer srv.Close()
	tr := &httpretry.Transport{MaxAttempts: 1, IdleTimeout: 50 * time.Millisecond}
	defer tr.CloseIdleConnections()

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	if err != nil {
		return false
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return errors.Is(err, httpretry.ErrIdleTimeout)
	}
	defer resp.Body.Close()
	_, err = io.ReadAll(resp.Body)
	return errors.Is(err, httpretry.ErrIdleTimeout)
}
