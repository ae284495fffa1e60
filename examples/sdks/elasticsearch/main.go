// Command elasticsearch runs go-elasticsearch (v8, its esapi functions)
// over httpretry against a local fake of the _search API.
//
// The client retries by itself (502, 503 and 504, and network errors, up
// to 3 retries): turn that off with DisableRetry and hand httpretry over
// as Transport: elasticsearch.Config's DisableRetry and Transport fields
// for elasticsearch.NewClient, or elastictransport.WithDisableRetry and
// WithTransport for elastictransport.NewClient, which this example uses
// with esapi.New: the elasticsearch package itself imports the typed API,
// which takes minutes to compile, and esapi needs only a transport. (elasticsearch.NewClient also checks that the server answers
// with "X-Elastic-Product: Elasticsearch"; the fake sends it.)
//
// _search is a POST. httpretry repeats a POST only when it is marked safe
// to repeat: per request with httpretry.WithIdempotent on the context
// passed to the esapi call (es.Search.WithContext), or for a client that
// only reads with Transport.Idempotent = httpretry.AlwaysIdempotent. A
// client that also indexes documents should mark its searches one by one.
//
//	go run ./elasticsearch
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/elastic/elastic-transport-go/v8/elastictransport"
	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/examples/sdks/internal/fake"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "elasticsearch:", err)
		os.Exit(1)
	}
}

// newClient returns an Elasticsearch API client for addr that sends
// through tr and does not retry by itself.
func newClient(addr string, tr http.RoundTripper) (*esapi.API, error) {
	return newClientRetrying(addr, tr, false)
}

// newClientRetrying is newClient with the client's own retries on when
// sdkRetries is set, to show what they add.
func newClientRetrying(addr string, tr http.RoundTripper, sdkRetries bool) (*esapi.API, error) {
	u, err := url.Parse(addr)
	if err != nil {
		return nil, err
	}
	opts := []elastictransport.Option{elastictransport.WithURLs(u), elastictransport.WithTransport(tr)}
	if !sdkRetries {
		opts = append(opts, elastictransport.WithDisableRetry()) // httpretry is the only retry layer
	}
	tp, err := elastictransport.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	return esapi.New(tp), nil
}

// query is the search every example sends.
const query = `{"query":{"match":{"title":"release"}}}`

// search runs query against the books index and returns the titles found,
// or the status of an error response.
func search(ctx context.Context, es *esapi.API) (titles []string, status int, err error) {
	res, err := es.Search(
		es.Search.WithContext(ctx),
		es.Search.WithIndex("books"),
		es.Search.WithBody(strings.NewReader(query)),
	)
	if err != nil {
		return nil, 0, err
	}
	defer res.Body.Close()
	if res.IsError() {
		return nil, res.StatusCode, nil
	}
	var body struct {
		Hits struct {
			Hits []struct {
				Source struct {
					Title string `json:"title"`
				} `json:"_source"`
			} `json:"hits"`
		} `json:"hits"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		return nil, res.StatusCode, fmt.Errorf("decoding search response: %w", err)
	}
	for _, h := range body.Hits.Hits {
		titles = append(titles, h.Source.Title)
	}
	return titles, res.StatusCode, nil
}

func run(w io.Writer) error {
	srv := fake.NewServer(unavailableOnce)
	defer srv.Close()
	tr := &httpretry.Transport{Timeout: 5 * time.Second}
	defer tr.CloseIdleConnections()
	es, err := newClient(srv.URL, tr)
	if err != nil {
		return err
	}

	// This search is safe to repeat; say so for this call only.
	ctx := httpretry.WithIdempotent(context.Background())
	titles, status, err := search(ctx, es)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "search: status %d, titles %q, after %d requests\n", status, titles, srv.Hits())
	return nil
}

// unavailableOnce answers the first request 503, as a node does while its
// shards recover, and every later one with a search result.
func unavailableOnce(w http.ResponseWriter, r *http.Request, hit int) {
	w.Header().Set("X-Elastic-Product", "Elasticsearch")
	w.Header().Set("Content-Type", "application/json")
	if hit == 1 {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error":{"type":"search_phase_execution_exception","reason":"all shards failed"},"status":503}`)
		return
	}
	writeHits(w)
}

func writeHits(w http.ResponseWriter) {
	fmt.Fprint(w, `{"took":1,"timed_out":false,"_shards":{"total":1,"successful":1,"skipped":0,"failed":0},`+
		`"hits":{"total":{"value":1,"relation":"eq"},"max_score":1.0,"hits":[`+
		`{"_index":"books","_id":"1","_score":1.0,"_source":{"title":"Release It!"}}]}}`)
}
