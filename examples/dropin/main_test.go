package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	var buf bytes.Buffer
	if err := run(&buf); err != nil {
		t.Fatalf("run: %v", err)
	}
	got := buf.String()
	for _, want := range []string{
		"status: 200 OK\n",
		"body: hello from a server that failed once\n",
		"server saw 2 requests\n",
		"outcome: attempts=2 reason=final ",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q; got:\n%s", want, got)
		}
	}
}
