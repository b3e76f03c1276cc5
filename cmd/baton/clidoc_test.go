package main

import (
	"os"
	"slices"
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

// TestEveryGroupHasTheVerbs: docs/cli.md ("Verbs") promises that every
// group's delete is also rm and del, and its list also ls; a command
// added without them fails here (schedule delete had neither).
func TestEveryGroupHasTheVerbs(t *testing.T) {
	want := map[string][]string{"delete": {"rm", "del"}, "list": {"ls"}}
	checked := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, s := range c.Commands() {
			walk(s)
		}
		aliases, ok := want[c.Name()]
		if !ok || c.HasSubCommands() {
			return
		}
		checked++
		for _, a := range aliases {
			if !slices.Contains(c.Aliases, a) {
				t.Errorf("%q has no alias %q", c.CommandPath(), a)
			}
		}
	}
	walk(newRoot(&app{}))
	if checked < 5 {
		t.Fatalf("found %d delete and list commands; the tree was not read", checked)
	}
}
