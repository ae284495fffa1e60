// Command wrapsdk shows httpretry under a third-party style SDK that accepts an
// [*http.Client] but knows nothing about retries.
//
// BooksClient stands for any SDK client: it builds requests, decodes JSON
// and maps status codes to errors. The application, not the SDK, decides
// the retry policy: it wraps the client's Transport with
// [httpretry.Transport] before handing the client over, and watches every
// operation through the Transport's OnDone hook. The SDK code is unchanged
// and sees only the final response.
//
// A local server answers each book's first request with 503, so every
// successful lookup takes two attempts; a missing book gets 404, which is
// final and reaches the SDK after one attempt.
//
//	go run ./examples/wrapsdk
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/httpretry/httpretry"
)

// ---- The SDK: knows nothing about httpretry. ----

// Book is a book as the Books API returns it.
type Book struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Author string `json:"author"`
}

// ErrNotFound is returned by GetBook for a book that does not exist.
var ErrNotFound = errors.New("books: not found")

// BooksClient is a client of the Books API. HTTP is used for every call;
// callers configure it (timeouts, transports) as they see fit.
type BooksClient struct {
	HTTP    *http.Client
	BaseURL string
}

// GetBook fetches the book with the given id.
func (c *BooksClient) GetBook(ctx context.Context, id string) (*Book, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+"/books/"+url.PathEscape(id), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("books: get %s: %w", id, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, ErrNotFound
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("books: get %s: unexpected status %s", id, resp.Status)
	}
	var b Book
	if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
		return nil, fmt.Errorf("books: get %s: decoding: %w", id, err)
	}
	return &b, nil
}

// ---- The application. ----

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sdk:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	srv := httptest.NewServer(newBooksServer())
	defer srv.Close()

	// The application's client, wrapped before the SDK gets it.
	httpClient := &http.Client{Timeout: 2 * time.Second}
	httpClient.Transport = &httpretry.Transport{
		Base:      httpClient.Transport,
		BaseDelay: 50 * time.Millisecond,
		OnDone: func(req *http.Request, o httpretry.Outcome) {
			// OnDone runs on the caller's goroutine, here run's.
			fmt.Fprintf(w, "  retry layer: %s %s: attempts=%d reason=%s status=%d\n",
				req.Method, req.URL.Path, o.Attempts, o.Reason, o.Status)
		},
	}
	defer httpClient.CloseIdleConnections()

	books := &BooksClient{HTTP: httpClient, BaseURL: srv.URL}
	ctx := context.Background()
	for _, id := range []string{"1", "2", "42"} {
		fmt.Fprintf(w, "GetBook(%q)\n", id)
		b, err := books.GetBook(ctx, id)
		switch {
		case errors.Is(err, ErrNotFound):
			fmt.Fprintf(w, "  result: not found\n")
		case err != nil:
			return err
		default:
			fmt.Fprintf(w, "  result: %q by %s\n", b.Title, b.Author)
		}
	}
	return nil
}

// newBooksServer returns a Books API whose first request for each book
// fails with 503.
func newBooksServer() http.Handler {
	catalog := map[string]Book{
		"1": {ID: "1", Title: "The Go Programming Language", Author: "Donovan and Kernighan"},
		"2": {ID: "2", Title: "Release It!", Author: "Michael T. Nygard"},
	}
	var mu sync.Mutex
	seen := make(map[string]bool) // guarded by mu
	mux := http.NewServeMux()
	mux.HandleFunc("GET /books/{id}", func(rw http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		mu.Lock()
		first := !seen[id]
		seen[id] = true
		mu.Unlock()
		b, ok := catalog[id]
		switch {
		case !ok:
			http.NotFound(rw, r)
		case first:
			http.Error(rw, "cache cold, try again", http.StatusServiceUnavailable)
		default:
			rw.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(rw).Encode(b)
		}
	})
	return mux
}
