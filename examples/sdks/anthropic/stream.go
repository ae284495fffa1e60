package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/httpretry/httpretry/examples/sdks/internal/fake"
)

// streamText sends a streaming messages.create and returns the text the
// stream delivered, with the stream's error if it broke off.
func streamText(ctx context.Context, client *anthropic.Client) (string, error) {
	stream := client.Messages.NewStreaming(ctx, newParams())
	defer stream.Close()
	var b strings.Builder
	for stream.Next() {
		ev := stream.Current()
		if ev.Type == "content_block_delta" {
			b.WriteString(ev.Delta.Text)
		}
	}
	return b.String(), stream.Err()
}

// sse answers a streaming messages.create with server-sent events, one
// text delta per word, Gap apart. With Stall > 0 it stops sending after
// that many words and holds the connection open until the client leaves:
// a stream stalled mid-answer.
type sse struct {
	Words []string
	Gap   time.Duration
	Stall int
}

func (s sse) respond(w http.ResponseWriter, r *http.Request, _ int) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	f := w.(http.Flusher)
	event := func(name, data string) {
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
		f.Flush()
	}
	event("message_start", `{"type":"message_start","message":{"id":"msg_fake","type":"message",`+
		`"role":"assistant","model":"claude-haiku-4-5","content":[],"stop_reason":null,`+
		`"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}`)
	event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	for i, word := range s.Words {
		if s.Stall > 0 && i == s.Stall {
			fake.Hang(r)
			return
		}
		if i > 0 && !sleep(r.Context(), s.Gap) {
			return
		}
		event("content_block_delta", fmt.Sprintf(
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":%q}}`, word))
	}
	event("content_block_stop", `{"type":"content_block_stop","index":0}`)
	event("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":"end_turn",`+
		`"stop_sequence":null},"usage":{"output_tokens":%d}}`, len(s.Words)))
	event("message_stop", `{"type":"message_stop"}`)
}

// sleep waits d, or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
