package main

import (
	"bytes"
	"regexp"
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
		"server: request 1, key ",
		": created ord-1, then the response is lost (503)\n",
		"server: request 2, key ",
		": already have ord-1, replaying it (201)\n",
		"client: got order ord-1 (espresso machine): attempts=2 reason=final\n",
		"client: got order ord-1 (espresso machine): attempts=1 reason=final\n",
		"server: 3 requests received, 1 order(s) created\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q; got:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "created ord-"); n != 1 {
		t.Errorf("server created %d orders, want 1; got:\n%s", n, got)
	}
	// Every request carried the same key.
	keys := regexp.MustCompile(`key (\S+)…`).FindAllStringSubmatch(got, -1)
	if len(keys) != 3 {
		t.Fatalf("found %d keyed requests, want 3; got:\n%s", len(keys), got)
	}
	for _, k := range keys[1:] {
		if k[1] != keys[0][1] {
			t.Errorf("key %s differs from the first, %s", k[1], keys[0][1])
		}
	}
}
