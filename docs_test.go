package httpretry

import (
	"bufio"
	"errors"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// This file checks the Markdown of the repository: that every Go block in
// the README and docs/ compiles, and that every relative link resolves.
//
// A ```go block is checked by these rules, so that a doc can show the
// lines that matter without the boilerplate around them:
//
//   - A block that parses as a file's declarations (a type, a func) is
//     checked as such; any other block as the body of a function.
//   - Imports are implied: a block's package names (httpretry, http, time,
//     clockwork, …) are resolved through docImports.
//   - A block may use variables it does not declare (client, req, ctx,
//     mux): they stand for the reader's own. Its own unused variables and an
//     expression shown alone (&httpretry.Transport{…}) are allowed too.
//     Everything else must type-check: a renamed field, a wrong argument, a
//     missing package-level name fail the test.
//   - An ellipsis (…) stands for the reader's own arguments: it is read
//     as an undeclared variable.
//   - A block that names a package outside the root module (an SDK, a
//     contrib module: docOutsideRoot) is only parsed, since the root module
//     does not depend on it; its programs are tested in that module
//     (examples/sdks, contrib/*).

// docImports maps the package names Go blocks use to their import paths.
var docImports = map[string]string{
	"httpretry":    "github.com/httpretry/httpretry",
	"idempotency":  "github.com/httpretry/httpretry/idempotency",
	"storetest":    "github.com/httpretry/httpretry/idempotency/storetest",
	"httptestutil": "github.com/httpretry/httpretry/httptestutil",
	"throttle":     "github.com/httpretry/httpretry/throttle",
	"spread":       "github.com/httpretry/httpretry/spread",
	"clockwork":    "github.com/jonboulle/clockwork",
	"http":         "net/http",
	"url":          "net/url",
	"time":         "time",
	"context":      "context",
	"errors":       "errors",
	"log":          "log",
	"slog":         "log/slog",
	"io":           "io",
	"os":           "os",
	"fmt":          "fmt",
	"strings":      "strings",
	"bytes":        "bytes",
}

// docOutsideRoot names the packages of other modules that Go blocks use,
// with the module whose tests exercise them.
var docOutsideRoot = map[string]string{
	"redis":         "contrib/redisretry",
	"redisretry":    "contrib/redisretry",
	"pgidempotency": "contrib/pgidempotency",
	"pgxpool":       "contrib/pgidempotency",
	"pgx":           "contrib/pgidempotency",
	"promretry":     "contrib/promretry",
	"prometheus":    "contrib/promretry",
	"otelretry":     "contrib/otelretry",
	"otelhttp":      "contrib/otelretry",
	"anthropic":     "examples/sdks",
	"option":        "examples/sdks",
	"openai":        "examples/sdks",
	"stripe":        "examples/sdks",
	"config":        "examples/sdks",
	"aws":           "examples/sdks",
	"retry":         "examples/sdks",
	"resty":         "examples/sdks",
	"minio":         "examples/sdks",
	"elasticsearch": "examples/sdks",
	"rest":          "examples/sdks",
	"storage":       "examples/sdks",
	"kubernetes":    "examples/sdks",
	"transport":     "examples/sdks",
}

// docFiles returns the Markdown whose Go blocks are checked: the README and
// every page under docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "CONTRIBUTING.md"}
	more, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append(files, more...)
}

// goBlock is one fenced ```go block of a Markdown file.
type goBlock struct {
	file string
	line int // of the opening fence, 1-based
	code string
}

// goBlocks returns the ```go blocks of a Markdown text, each with the
// indentation of its fence removed (a block inside a list item).
func goBlocks(file, text string) []goBlock {
	var blocks []goBlock
	var cur *goBlock
	indent := ""
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimLeft(line, " \t")
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			if strings.TrimSpace(strings.TrimPrefix(trimmed, "```")) == "go" {
				cur = &goBlock{file: file, line: i + 1}
				indent = line[:len(line)-len(trimmed)]
			} else {
				cur = &goBlock{line: -1} // another language: skipped
			}
		case cur != nil && strings.HasPrefix(trimmed, "```"):
			if cur.line > 0 {
				blocks = append(blocks, *cur)
			}
			cur = nil
		case cur != nil && cur.line > 0:
			cur.code += strings.TrimPrefix(line, indent) + "\n"
		}
	}
	return blocks
}

// TestDocGoBlocksCompile checks every ```go block of the README and docs/
// by the rules at the top of this file.
func TestDocGoBlocksCompile(t *testing.T) {
	realTime(t)
	t.Parallel()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", exportData(t))
	checked := 0
	for _, file := range docFiles(t) {
		text, err := os.ReadFile(file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range goBlocks(file, string(text)) {
			where := b.file + ":" + strconv.Itoa(b.line)
			// The file name places the block in the module's root, so
			// that the importer resolves the module's own packages.
			f, err := parseBlock(fset, filepath.Join(wd, where+".go"), b.code)
			if err != nil {
				t.Errorf("%s: the Go block does not parse: %v", where, err)
				continue
			}
			if outside := blockOutsideRoot(f); outside != "" {
				t.Logf("%s: parsed only: uses %s, tested in %s", where, outside, docOutsideRoot[outside])
				continue
			}
			addImports(f)
			conf := types.Config{Importer: imp, Error: func(err error) {
				if !allowedInBlock(err) {
					t.Errorf("%s: %v", where, err)
				}
			}}
			conf.Check("docblock", fset, []*ast.File{f}, nil)
			checked++
		}
	}
	if checked < 10 {
		t.Errorf("%d Go blocks type-checked; the README and docs/ hold more: is the extraction broken?", checked)
	}
}

// exportData returns a lookup of the compiler's export data for the
// packages of docImports and their dependencies, from one `go list
// -export`: the build cache serves it, so the blocks are checked without
// type-checking net/http from source.
func exportData(t *testing.T) func(path string) (io.ReadCloser, error) {
	t.Helper()
	args := []string{"list", "-export", "-deps", "-f", "{{.ImportPath}}={{.Export}}"}
	for _, path := range docImports {
		args = append(args, path)
	}
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	files := map[string]string{}
	for line := range strings.Lines(string(out)) {
		if path, file, ok := strings.Cut(strings.TrimSpace(line), "="); ok && file != "" {
			files[path] = file
		}
	}
	return func(path string) (io.ReadCloser, error) {
		file, ok := files[path]
		if !ok {
			return nil, errors.New("no export data for " + path + ": add it to docImports")
		}
		return os.Open(file)
	}
}

// parseBlock parses a block as a file's declarations, or else as the body
// of a function.
func parseBlock(fset *token.FileSet, name, code string) (*ast.File, error) {
	code = strings.ReplaceAll(code, "…", "ellipsis")
	if f, err := parser.ParseFile(fset, name, "package docblock\n"+code, parser.SkipObjectResolution); err == nil {
		return f, nil
	}
	return parser.ParseFile(fset, name, "package docblock\nfunc _() {\n"+code+"\n}\n", parser.SkipObjectResolution)
}

// blockOutsideRoot returns a package of another module that the block
// uses, or "".
func blockOutsideRoot(f *ast.File) string {
	found := ""
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && docOutsideRoot[id.Name] != "" && found == "" {
				found = id.Name
			}
		}
		return true
	})
	return found
}

// addImports adds to f an import for each package name of docImports it
// uses.
func addImports(f *ast.File) {
	var used []string
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && docImports[id.Name] != "" && !slices.Contains(used, id.Name) {
				used = append(used, id.Name)
			}
		}
		return true
	})
	decl := &ast.GenDecl{Tok: token.IMPORT}
	for _, name := range used {
		decl.Specs = append(decl.Specs, &ast.ImportSpec{
			Name: ast.NewIdent(name),
			Path: &ast.BasicLit{Kind: token.STRING, Value: `"` + docImports[name] + `"`},
		})
	}
	if len(used) > 0 {
		f.Decls = append([]ast.Decl{decl}, f.Decls...)
	}
}

// reUndefinedVar matches the type checker's error for an undeclared
// variable (not a missing name in a package: "undefined: httpretry.X").
var reUndefinedVar = regexp.MustCompile(`^undefined: [\pL_][\pL\pN_]*$`)

// allowedInBlock reports whether a type-checking error is one the rules
// allow: a variable the reader supplies, an unused variable, an expression
// shown alone.
func allowedInBlock(err error) bool {
	var te types.Error
	if !errors.As(err, &te) {
		return false
	}
	msg := te.Msg
	return reUndefinedVar.MatchString(msg) ||
		strings.HasPrefix(msg, "declared and not used") ||
		strings.HasSuffix(msg, " is not used")
}

// TestDocLinksResolve checks every relative link of every Markdown file in
// the repository: the file it names exists and, for a link into Markdown
// with a #fragment, a heading of that file has that anchor.
func TestDocLinksResolve(t *testing.T) {
	t.Parallel()
	var files []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != "." || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]map[string]bool{}
	links := 0
	for _, file := range files {
		for _, l := range mdLinks(t, file) {
			target, frag, _ := strings.Cut(l.target, "#")
			path := file
			if target != "" {
				path = filepath.Join(filepath.Dir(file), target)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link to %s: no such file", file, l.line, l.target)
					continue
				}
			}
			links++
			if frag == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			if anchors[path] == nil {
				anchors[path] = mdAnchors(t, path)
			}
			if !anchors[path][frag] {
				t.Errorf("%s:%d: link to %s: %s has no heading with anchor #%s", file, l.line, l.target, path, frag)
			}
		}
	}
	if links < 20 {
		t.Errorf("%d relative links found in %d Markdown files; is the extraction broken?", links, len(files))
	}
}

// mdLink is one relative link of a Markdown file.
type mdLink struct {
	line   int
	target string
}

var (
	reMdLink   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	reCodeSpan = regexp.MustCompile("`[^`]*`")
)

// mdLinks returns the relative links of a Markdown file, outside code
// blocks and code spans: links with a scheme (https:, mailto:) are not
// checked.
func mdLinks(t *testing.T, file string) []mdLink {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var links []mdLink
	inCode := false
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimLeft(line, " \t"), "```") {
			inCode = !inCode
			continue
		}
		if inCode {
			continue
		}
		for _, m := range reMdLink.FindAllStringSubmatch(reCodeSpan.ReplaceAllString(line, ""), -1) {
			target := m[1]
			if regexp.MustCompile(`^[a-zA-Z][a-zA-Z+.-]*:`).MatchString(target) {
				continue
			}
			links = append(links, mdLink{line: n, target: target})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return links
}

// mdAnchors returns the anchors GitHub gives the headings of a Markdown
// file: lower case, punctuation other than '-' and '_' dropped, spaces
// as '-', and -1, -2 … for repeats.
func mdAnchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	seen := map[string]int{}
	inCode := false
	for line := range strings.Lines(string(text)) {
		if strings.HasPrefix(strings.TrimLeft(line, " \t"), "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		a := githubAnchor(title)
		if k := seen[a]; k > 0 {
			anchors[a+"-"+strconv.Itoa(k)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

// githubAnchor returns the anchor GitHub derives from a heading's text.
func githubAnchor(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 && !strings.ContainsRune("—–×·…’“”", r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
