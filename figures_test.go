package httpretry

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/httpretry/httpretry/internal/figures"
)

// This file keeps the figures the docs quote true to the files that make
// targets generate (CONTRIBUTING.md, "Figures"):
//
//   - A doc quotes measured figures only between
//     <!-- figures: FILE [FILE…] --> and <!-- /figures -->, FILE relative to
//     the doc. Every number in that region must appear in one of the files.
//   - A generated file says in its first lines which command wrote it and
//     when (a "make …" or "go run …" line with a YYYY-MM-DD date), and the
//     Makefile names it, so that a target regenerates it.
//   - A region whose files were never generated (a slow target not yet run
//     on this commit) is pending: logged, not checked. The first run of
//     its target turns the check on, and the doc must then agree with it.
//   - Outside the regions, forms that only a measurement produces — a
//     decimal multiple (1.12×), a decimal percentage, a time in ns or µs, a
//     count per op (allocs/op, B/op), a "measured on" date or commit — fail
//     the test.

var (
	// reNumber matches a number as docs and generated files write it:
	// 1,325, 2.98, 0.3, 98.13.
	reNumber = regexp.MustCompile(`\d[\d,]*(?:\.\d+)?`)
	// reUnmarkedFigure matches what only a measurement produces.
	reUnmarkedFigure = regexp.MustCompile(`\d\.\d+ ?×|\d\.\d+ ?%|\d ?(?:ns|µs)\b|\d (?:allocs|B)/op|(?i:measured (?:on )?\d{4}-\d\d-\d\d)|(?i:at commit) ` + "`?" + `[0-9a-f]{7}`)
	reGeneratedBy    = regexp.MustCompile(`(?:make [a-z-]+|go run).*\d{4}-\d\d-\d\d|\d{4}-\d\d-\d\d.*(?:make [a-z-]+|go run)`)
)

// TestDocFiguresGenerated checks the docs' figures by the rules above.
func TestDocFiguresGenerated(t *testing.T) {
	t.Parallel()
	makefile, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := figures.Docs(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range docs {
		text, err := os.ReadFile(doc)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		regions, outside, err := figures.Parse(string(text))
		if err != nil {
			t.Errorf("%s: %v", doc, err)
			continue
		}
		for n, line := range outside {
			if m := reUnmarkedFigure.FindString(line); m != "" {
				t.Errorf("%s:%d: %q is a measured figure outside a <!-- figures: FILE --> region: quote it from a generated file", doc, n, m)
			}
		}
		for _, r := range regions {
			checkFigureRegion(t, doc, r, string(makefile))
		}
	}
}

// checkFigureRegion checks one region: its files are generated and named
// in the Makefile, and hold every number the region quotes.
func checkFigureRegion(t *testing.T, doc string, r figures.Region, makefile string) {
	t.Helper()
	held := map[string]bool{}
	var pending []string
	for _, f := range r.Files {
		path := filepath.Join(filepath.Dir(doc), f)
		if !strings.Contains(makefile, filepath.ToSlash(path)) && !strings.Contains(makefile, filepath.ToSlash(filepath.Dir(path))) {
			t.Errorf("%s:%d: %s is named by no Makefile target: a figure must come from a make target", doc, r.Line, path)
		}
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			pending = append(pending, path)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		head := strings.Join(strings.SplitN(string(data), "\n", 6)[:min(5, strings.Count(string(data), "\n")+1)], "\n")
		if !reGeneratedBy.MatchString(head) {
			t.Errorf("%s:%d: %s does not say in its first lines which command wrote it and when", doc, r.Line, path)
		}
		for _, num := range reNumber.FindAllString(string(data), -1) {
			held[strings.ReplaceAll(num, ",", "")] = true
		}
	}
	if len(pending) > 0 {
		t.Logf("%s:%d: pending until its target runs: %s", doc, r.Line, strings.Join(pending, ", "))
		return
	}
	for _, num := range reNumber.FindAllString(r.Text, -1) {
		if !held[strings.ReplaceAll(strings.TrimRight(num, ","), ",", "")] {
			t.Errorf("%s:%d: the figure %s is in none of %s", doc, r.Line, num, strings.Join(r.Files, ", "))
		}
	}
}
