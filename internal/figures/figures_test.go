package figures

import (
	"strings"
	"testing"
)

func TestShape(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ line, want string }{
		{"orders 10000 in 19.191s: confirmed (201) 9744, failed 256", "orders # in #: confirmed (#) #, failed #"},
		{"    chain_test.go:161: D's context ended 354.257µs after", "chain_test.go:#: D's context ended # after"},
		{"Test efficacy: 98.80%", "Test efficacy: #"},
		{"a unit that changes: 909ms", "a unit that changes: #"},
		{"a unit that changes: 1.2s", "a unit that changes: #"},
		{"    chain_test.go:161: D's context ended -312.5µs after", "chain_test.go:#: D's context ended # after"},
		{"| policy | 1,325 | 1.01× |", "| policy | # | # |"},
		{"no figures here", "no figures here"},
		{"   ", ""},
	} {
		if got := Shape(tt.line); got != tt.want {
			t.Errorf("Shape(%q) = %q; want %q", tt.line, got, tt.want)
		}
	}
}

// TestRequote: the lines of a region that quote a line of its file, but
// for the numbers, take the file's current line, indented as in the doc;
// repeated shapes are quoted in the file's order; prose, code fences,
// lines outside regions and regions whose file is missing stay as they
// are.
func TestRequote(t *testing.T) {
	t.Parallel()
	file := strings.Join([]string{
		"# make demo, 2026-12-06",
		"== run 1: every reply delivered",
		"orders 300 in 2.5s: confirmed 290, failed 10",
		"OK: every order charged exactly once",
		"== run 2: 5% of replies lost",
		"orders 300 in 3.1s: confirmed 295, failed 5",
		"Redis replies lost after the command ran: 17",
	}, "\n")
	doc := strings.Join([]string{
		"orders 10000 in 19.191s: confirmed 9744, failed 256",
		"<!-- figures: out.txt -->",
		"```",
		"orders 10000 in 19.191s: confirmed 9744, failed 256",
		"```",
		"Prose with 3 attempts stays.",
		"  == run 2: 5% of replies lost",
		"  orders 10000 in 21.3s: confirmed 9783, failed 217",
		"  Redis replies lost after the command ran: 1338",
		"<!-- /figures -->",
		"<!-- figures: missing.txt -->",
		"orders 1 in 1s: confirmed 1, failed 0",
		"<!-- /figures -->",
	}, "\n")
	got, err := Requote(doc, func(name string) (string, bool) {
		return file, name == "out.txt"
	})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"orders 10000 in 19.191s: confirmed 9744, failed 256",
		"<!-- figures: out.txt -->",
		"```",
		"orders 300 in 2.5s: confirmed 290, failed 10",
		"```",
		"Prose with 3 attempts stays.",
		"  == run 2: 5% of replies lost",
		"  orders 300 in 3.1s: confirmed 295, failed 5",
		"  Redis replies lost after the command ran: 17",
		"<!-- /figures -->",
		"<!-- figures: missing.txt -->",
		"orders 1 in 1s: confirmed 1, failed 0",
		"<!-- /figures -->",
	}, "\n")
	if got != want {
		t.Errorf("Requote:\n%s\nwant:\n%s", got, want)
	}
}

func TestParseRejectsBrokenMarkers(t *testing.T) {
	t.Parallel()
	for _, text := range []string{
		"<!-- figures: a.txt -->\n<!-- figures: b.txt -->\n<!-- /figures -->\n<!-- /figures -->",
		"<!-- /figures -->",
		"<!-- figures: a.txt -->\nnever closed",
	} {
		if _, _, err := Parse(text); err == nil {
			t.Errorf("Parse(%q) succeeded; want an error", text)
		}
		if _, err := Requote(text, func(string) (string, bool) { return "", true }); err == nil {
			t.Errorf("Requote(%q) succeeded; want an error", text)
		}
	}
}
