// Command requote brings the figures that httpretry's docs quote up to
// date with the generated files they quote (see package figures). Every
// make target that writes a figure file runs it after writing:
//
//	go run ./internal/figures/requote
//
// It rewrites, in place, README.md, CONTRIBUTING.md, docs/*.md and
// contrib/redisretry/README_IDEMPOTENCY.md, from the repository's root.
package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/httpretry/httpretry/internal/figures"
)

func main() {
	docs, err := figures.Docs(".")
	if err == nil {
		err = requoteAll(docs)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "requote:", err)
		os.Exit(1)
	}
}

func requoteAll(docs []string) error {
	for _, doc := range docs {
		text, err := os.ReadFile(doc)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		out, err := figures.Requote(string(text), func(name string) (string, bool) {
			data, err := os.ReadFile(filepath.Join(filepath.Dir(doc), name))
			return string(data), err == nil
		})
		if err != nil {
			return fmt.Errorf("%s: %w", doc, err)
		}
		if out != string(text) {
			if err := os.WriteFile(doc, []byte(out), 0o644); err != nil {
				return err
			}
			fmt.Println("requote: updated", doc)
		}
	}
	return nil
}
