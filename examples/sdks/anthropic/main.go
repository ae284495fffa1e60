// Command anthropic runs the Anthropic Go SDK (anthropic-sdk-go v2) over
// httpretry, with the SDK's own retries off, against a local fake of the
// Messages API.
//
// The SDK retries by itself (2 retries by default). Retries belong to one
// layer: here httpretry owns them, so the SDK gets option.WithMaxRetries(0)
// and an *http.Client whose Transport is an httpretry.Transport. The SDK's
// request bodies carry GetBody, so every attempt sends the same bytes.
//
// messages.create is a POST without an idempotency key. httpretry repeats
// it only when the API says so: Anthropic's error responses carry
// "x-should-retry: true" when another attempt is safe, which makes even a
// keyless POST repeatable, and "retry-after-ms" when the API wants a
// minimum wait.
//
// The fake answers 529 (overloaded), 503 and 429 with "retry-after-ms:
// 800", then the message:
//
//	go run ./anthropic
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/examples/sdks/internal/fake"
)

// statusOverloaded is the status Anthropic's API answers when it is
// overloaded ("overloaded_error"): httpretry.IsTransient treats it as 503.
const statusOverloaded = 529

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "anthropic:", err)
		os.Exit(1)
	}
}

// newTransport is the retry layer for an Anthropic client: four attempts
// in all, the whole operation (attempts and waits) bounded. IdleTimeout
// cuts a stream that stops sending for 30s without capping how long a
// flowing stream may run.
func newTransport() *httpretry.Transport {
	return &httpretry.Transport{
		MaxAttempts: 4,
		Timeout:     10 * time.Minute,
		IdleTimeout: 30 * time.Second,
	}
}

// newClient returns an Anthropic client that sends through tr and does not
// retry by itself.
func newClient(baseURL string, tr http.RoundTripper) *anthropic.Client {
	c := anthropic.NewClient(
		option.WithAPIKey("sk-ant-test"),
		option.WithBaseURL(baseURL),
		option.WithHTTPClient(&http.Client{Transport: tr}),
		option.WithMaxRetries(0), // httpretry is the only retry layer
	)
	return &c
}

// newParams is the request every example sends.
func newParams() anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     anthropic.ModelClaudeHaiku4_5,
		MaxTokens: 64,
		Messages: []anthropic.MessageParam{
			anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello.")),
		},
	}
}

func run(w io.Writer) error {
	srv := fake.NewServer(overloadedThenOK)
	defer srv.Close()

	tr := newTransport()
	tr.OnAttempt = func(_ *http.Request, a httpretry.Attempt) {
		fmt.Fprintf(w, "attempt %d: status %d, next wait %v\n", a.Number, a.Status, a.Wait.Round(100*time.Millisecond))
	}
	defer tr.CloseIdleConnections()
	client := newClient(srv.URL, tr)

	msg, err := client.Messages.New(context.Background(), newParams())
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "reply: %q after %d requests\n", msg.Content[0].Text, srv.Hits())
	return nil
}

// overloadedThenOK answers as the Messages API does on a bad minute: 529,
// 503, then 429 asking for 800ms, each saying another attempt is safe; then
// the message.
func overloadedThenOK(w http.ResponseWriter, _ *http.Request, hit int) {
	switch hit {
	case 1:
		apiError(w, statusOverloaded, "overloaded_error", "Overloaded", nil)
	case 2:
		apiError(w, http.StatusServiceUnavailable, "api_error", "Service unavailable", nil)
	case 3:
		apiError(w, http.StatusTooManyRequests, "rate_limit_error", "Rate limited",
			http.Header{"Retry-After-Ms": {"800"}, "Retry-After": {"1"}})
	default:
		writeMessage(w, "Hello!")
	}
}

// apiError writes an Anthropic error response, with x-should-retry: true
// unless extra sets it.
func apiError(w http.ResponseWriter, status int, typ, message string, extra http.Header) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Request-Id", "req_fake")
	h.Set("X-Should-Retry", "true")
	for k, v := range extra {
		h[k] = v
	}
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"type":"error","error":{"type":%q,"message":%q},"request_id":"req_fake"}`, typ, message)
}

// writeMessage writes a Messages API success with one text block.
func writeMessage(w http.ResponseWriter, text string) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"msg_fake","type":"message","role":"assistant","model":"claude-haiku-4-5",`+
		`"content":[{"type":"text","text":%q}],"stop_reason":"end_turn","stop_sequence":null,`+
		`"usage":{"input_tokens":10,"output_tokens":3}}`, text)
}
