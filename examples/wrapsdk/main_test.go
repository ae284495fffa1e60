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
	want := `GetBook("1")
  retry layer: GET /books/1: attempts=2 reason=final status=200
  result: "The Go Programming Language" by Donovan and Kernighan
GetBook("2")
  retry layer: GET /books/2: attempts=2 reason=final status=200
  result: "Release It!" by Michael T. Nygard
GetBook("42")
  retry layer: GET /books/42: attempts=1 reason=final status=404
  result: not found
`
	if got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
	if strings.Count(got, "retry layer:") != 3 {
		t.Errorf("OnDone ran %d times, want 3", strings.Count(got, "retry layer:"))
	}
}
