// Package figures reads and rewrites the regions in which httpretry's docs
// quote figures from generated files (CONTRIBUTING.md, "Figures"):
//
//	<!-- figures: FILE [FILE…] -->
//	…
//	<!-- /figures -->
//
// FILE is relative to the doc. A line of a region that is a line of one of
// its files, but for its numbers, is a quote of that line: [Requote]
// copies the file's current line over it, so that a make target that
// regenerates a file also regenerates every doc line quoting it. Other
// lines of a region are prose, whose figures the docs' tests check
// against the files.
package figures

import (
	"errors"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

var (
	reOpen  = regexp.MustCompile(`^<!-- figures: (.+?) -->$`)
	reClose = regexp.MustCompile(`^<!-- /figures -->$`)
	// reMeasured matches a number as a measurement writes it, with its
	// sign and the unit glued to it: 1,325, 98.80%, 354.257µs, 2.6613s,
	// 1.01x, -1.2ms (a duration measured the other way round), so that a
	// line keeps its shape whichever way the next run comes out.
	reMeasured = regexp.MustCompile(`-?\d(?:[\d.,]*\d)?[A-Za-zµ%×]*`)
)

// Region is one marked region of a doc.
type Region struct {
	Line  int      // the opening marker's, 1-based
	End   int      // the closing marker's
	Files []string // as the marker names them, relative to the doc
	Text  string   // the lines between the markers
}

// Parse splits a doc into its regions and the lines outside them, by
// 1-based line number. A code block is quoted whole: markers in it are
// text. Markers are recognised with leading blanks (a region inside a
// list item).
func Parse(text string) (regions []Region, outside map[int]string, err error) {
	outside = map[int]string{}
	var cur *Region
	inCode := false
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		trimmed := strings.TrimSpace(line)
		if fence := strings.HasPrefix(trimmed, "```"); fence || inCode {
			inCode = inCode != fence
			if cur != nil {
				cur.Text += line + "\n"
			} else if !fence {
				outside[n] = line
			}
			continue
		}
		if m := reOpen.FindStringSubmatch(trimmed); m != nil {
			if cur != nil {
				return nil, nil, errors.New("line " + strconv.Itoa(n) + ": a figures region opens inside another")
			}
			cur = &Region{Line: n, Files: strings.Fields(m[1])}
			continue
		}
		if reClose.MatchString(trimmed) {
			if cur == nil {
				return nil, nil, errors.New("line " + strconv.Itoa(n) + ": <!-- /figures --> closes no region")
			}
			cur.End = n
			regions = append(regions, *cur)
			cur = nil
			continue
		}
		if cur != nil {
			cur.Text += line + "\n"
		} else {
			outside[n] = line
		}
	}
	if cur != nil {
		return nil, nil, errors.New("line " + strconv.Itoa(cur.Line) + ": a figures region is never closed")
	}
	return regions, outside, nil
}

// Shape returns a line with each number, and the unit glued to it,
// replaced by "#", and without its leading and trailing blanks: the part
// of a generated line that stays the same from run to run.
func Shape(line string) string {
	return reMeasured.ReplaceAllString(strings.TrimSpace(line), "#")
}

// Requote returns text with the quotes of every region brought up to date
// with the files they name: each line of a region whose shape is that of
// a line of its files (read in the order named, the search going on
// after the previous quote, so that repeated shapes are quoted in order)
// becomes that line, indented as the doc indents it. A line with no
// match is left alone. read returns a file's text by the name the marker
// gives, and false when it does not exist yet; a region with a missing
// file is left alone (its target has not run).
func Requote(text string, read func(name string) (string, bool)) (string, error) {
	regions, _, err := Parse(text)
	if err != nil {
		return "", err
	}
	lines := strings.Split(text, "\n")
	for _, r := range regions {
		var source []string
		complete := true
		for _, f := range r.Files {
			data, ok := read(f)
			if !ok {
				complete = false
				break
			}
			source = append(source, strings.Split(data, "\n")...)
		}
		if complete {
			requoteRegion(lines[r.Line:r.End-1], source)
		}
	}
	return strings.Join(lines, "\n"), nil
}

// requoteRegion rewrites, in place, the lines of one region that quote a
// line of source.
func requoteRegion(region, source []string) {
	shapes := make([]string, len(source))
	for i, s := range source {
		shapes[i] = Shape(s)
	}
	next := 0
	for i, line := range region {
		shape := Shape(line)
		if shape == "" || strings.HasPrefix(shape, "```") {
			continue
		}
		for j := next; j < len(source); j++ {
			if shapes[j] == shape {
				indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
				region[i] = indent + strings.TrimSpace(source[j])
				next = j + 1
				break
			}
		}
	}
}

// Docs returns the docs whose figures are checked and requoted, under
// root: README.md, CONTRIBUTING.md, docs/*.md and
// contrib/redisretry/README_IDEMPOTENCY.md.
func Docs(root string) ([]string, error) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	return append([]string{
		filepath.Join(root, "README.md"),
		filepath.Join(root, "CONTRIBUTING.md"),
		filepath.Join(root, "contrib", "redisretry", "README_IDEMPOTENCY.md"),
	}, docs...), nil
}
