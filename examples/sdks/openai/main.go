// Command openai runs go-openai (github.com/sashabaranov/go-openai) over
// httpretry against a local fake of the Chat Completions API.
//
// go-openai has no retries of its own: hand it an *http.Client whose
// Transport is an httpretry.Transport through ClientConfig.HTTPClient.
// A chat completion is a POST without an idempotency key. httpretry
// repeats it when the API's error response says "x-should-retry: true",
// and otherwise only when the caller marks the call safe to repeat:
// go-openai passes the call's context to the request, so
// httpretry.WithIdempotent(ctx) marks one call; AlwaysIdempotent as
// Transport.Idempotent marks every call of the client.
//
//	go run ./openai
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/examples/sdks/internal/fake"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "openai:", err)
		os.Exit(1)
	}
}

// newClient returns a go-openai client for the API at baseURL (ending in
// /v1) that sends through tr.
func newClient(baseURL string, tr http.RoundTripper) *openai.Client {
	cfg := openai.DefaultConfig("sk-test")
	cfg.BaseURL = baseURL
	cfg.HTTPClient = &http.Client{Transport: tr}
	return openai.NewClientWithConfig(cfg)
}

// newTransport is the retry layer: the whole call bounded, and a stream
// that stops sending for 30s cut.
func newTransport() *httpretry.Transport {
	return &httpretry.Transport{Timeout: 2 * time.Minute, IdleTimeout: 30 * time.Second}
}

func newRequest() openai.ChatCompletionRequest {
	return openai.ChatCompletionRequest{
		Model:    openai.GPT4oMini,
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "Say hi."}},
	}
}

func run(w io.Writer) error {
	srv := fake.NewServer(func(w http.ResponseWriter, _ *http.Request, hit int) {
		if hit == 1 {
			apiError(w, http.StatusInternalServerError, "server_error", "true")
			return
		}
		writeCompletion(w, "Hi!")
	})
	defer srv.Close()
	tr := newTransport()
	defer tr.CloseIdleConnections()

	resp, err := newClient(srv.URL+"/v1", tr).CreateChatCompletion(context.Background(), newRequest())
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "reply: %q after %d requests\n", resp.Choices[0].Message.Content, srv.Hits())
	return nil
}

// apiError writes an OpenAI error response; shouldRetry, when not empty,
// is sent as x-should-retry.
func apiError(w http.ResponseWriter, status int, typ, shouldRetry string) {
	w.Header().Set("Content-Type", "application/json")
	if shouldRetry != "" {
		w.Header().Set("X-Should-Retry", shouldRetry)
	}
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"message":"fake %s","type":%q,"param":null,"code":null}}`, typ, typ)
}

// writeCompletion writes a chat completion with one choice.
func writeCompletion(w http.ResponseWriter, text string) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"chatcmpl-fake","object":"chat.completion","created":1,"model":"gpt-4o-mini",`+
		`"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`, text)
}
