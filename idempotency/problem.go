package idempotency

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// DefaultProblemType is the problem type URI of the errors a [Handler]
// answers when [Options.ProblemType] is empty: the IETF draft that
// describes them.
const DefaultProblemType = "https://datatracker.ietf.org/doc/draft-ietf-httpapi-idempotency-key-header/"

// problem is an RFC 9457 problem details object, as the draft's examples
// show for its 400, 409 and 422 responses.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

// The problems a Handler answers.
func (h *handler) missingKey() problem {
	return problem{Status: http.StatusBadRequest, Title: "Idempotency-Key is missing",
		Detail: "This operation requires an Idempotency-Key header: send one unique key per operation, and the same key on every retry of it."}
}

func (h *handler) invalidKey() problem {
	return problem{Status: http.StatusBadRequest, Title: "Idempotency-Key is invalid",
		Detail: fmt.Sprintf("Send one Idempotency-Key of 1 to %d visible ASCII characters.", h.maxKeyLength)}
}

func (h *handler) keyReused() problem {
	return problem{Status: http.StatusUnprocessableEntity, Title: "Idempotency-Key is already used",
		Detail: "This Idempotency-Key was used for a different request (method, target or body), or by a different caller. Use a new key for a new request; retry a request unchanged."}
}

func (h *handler) outstanding() problem {
	return problem{Status: http.StatusConflict, Title: "A request is outstanding for this Idempotency-Key",
		Detail: "A request with the same Idempotency-Key is still being processed. Retry after the delay in Retry-After to receive its response."}
}

func (h *handler) tooLarge() problem {
	return problem{Status: http.StatusRequestEntityTooLarge, Title: "Request body is too large",
		Detail: fmt.Sprintf("With an Idempotency-Key, this operation accepts request bodies of at most %d bytes.", h.maxRequestBody)}
}

func (h *handler) unreadable() problem {
	return problem{Status: http.StatusBadRequest, Title: "Request body could not be read",
		Detail: "The request body ended before it was complete."}
}

func (h *handler) storeUnavailable() problem {
	return problem{Status: http.StatusServiceUnavailable, Title: "Idempotency-Key could not be checked",
		Detail: "The request was not processed. Retry after the delay in Retry-After."}
}

// writeProblem answers p as application/problem+json. 409 and 503 carry
// "Retry-After: 1": the request was not processed and may be repeated.
func (h *handler) writeProblem(w http.ResponseWriter, p problem) {
	p.Type = h.problemType
	body, err := json.Marshal(p)
	if err != nil {
		// A struct of strings and an int always marshals.
		body = []byte(`{}`)
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "application/problem+json")
	hdr.Set("Content-Language", "en")
	hdr.Set("Cache-Control", "no-store")
	if p.Status == http.StatusConflict || p.Status == http.StatusServiceUnavailable {
		hdr.Set("Retry-After", "1")
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}
