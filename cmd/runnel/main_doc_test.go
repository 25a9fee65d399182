package main

import (
	"go/parser"
	"go/token"
	"regexp"
	"testing"

	"github.com/spf13/cobra"
)

// TestPackageDocListsCommands: the package doc (main.go) has a line for
// every command the binary has, naming each of its subcommands, so the
// list cannot go stale.
func TestPackageDocListsCommands(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	word := func(w string) string { return `(^|[^a-z-])` + regexp.QuoteMeta(w) + `($|[^a-z-])` }
	for _, c := range newRootCommand().Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		line := regexp.MustCompile(`(?m)^\s*- ` + regexp.QuoteMeta(c.Name()) + `(:.*)?$`).FindString(doc)
		if line == "" {
			t.Errorf("main.go's package doc has no line for %q", c.Name())
			continue
		}
		for _, sub := range subcommands(c) {
			if !regexp.MustCompile(word(sub)).MatchString(line) {
				t.Errorf("main.go's package doc does not name %q on the line of %q", c.Name()+" "+sub, c.Name())
			}
		}
	}
}

func subcommands(c *cobra.Command) []string {
	var out []string
	for _, s := range c.Commands() {
		if s.Name() != "help" && s.Name() != "completion" {
			out = append(out, s.Name())
		}
	}
	return out
}
