package main

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestCLIDocNamesEveryCommand: every command of the tree (a leaf: one that
// runs) is named in docs/cli.md, as "baton GROUP NAME" by its name or one
// of its aliases ("[NAME]" for a group's default), so a subcommand added to
// a group's list without its documentation fails here.
func TestCLIDocNamesEveryCommand(t *testing.T) {
	doc, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	leaves := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		if c.HasSubCommands() {
			for _, s := range c.Commands() {
				walk(s)
			}
			return
		}
		leaves++
		parent := c.Parent().CommandPath()
		for _, name := range append([]string{c.Name()}, c.Aliases...) {
			if strings.Contains(string(doc), parent+" "+name) || strings.Contains(string(doc), parent+" ["+name+"]") {
				return
			}
		}
		t.Errorf("docs/cli.md does not name %q (or an alias of it)", c.CommandPath())
	}
	walk(newRoot(&app{}))
	if leaves < 50 {
		t.Fatalf("found %d commands; the tree was not read", leaves)
	}
}
