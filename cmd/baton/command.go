package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// command is one node of the command tree: a group with subcommands, a
// leaf with a run function, or both (run handles the bare group name).
type command struct {
	name     string
	summary  string
	usage    string // e.g. "task claim ID --owner NAME --lease DURATION"
	examples string
	flags    func(fs *flag.FlagSet) // declares the leaf's flags
	run      func(ctx context.Context, a *app, inv *invocation) error
	subs     []*command
}

// invocation is a parsed command line of a leaf.
type invocation struct {
	path string // e.g. "task claim", for messages
	fs   *flag.FlagSet
	args []string // positional arguments
}

var errHelp = errors.New("help requested")

// usageError is a mistake on the command line: exit status 2.
type usageError struct {
	path string
	msg  string
}

func (e *usageError) Error() string { return e.msg }

func usageErrorf(path, format string, args ...any) error {
	return &usageError{path: path, msg: fmt.Sprintf(format, args...)}
}

// dispatch walks args down the tree from cmd and runs the command found.
func dispatch(ctx context.Context, a *app, cmd *command, args []string) error {
	path := ""
	for len(args) > 0 {
		sub := cmd.sub(args[0])
		if sub == nil {
			break
		}
		cmd, args = sub, args[1:]
		path = strings.TrimSpace(path + " " + sub.name)
	}
	if len(cmd.subs) > 0 {
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") && args[0] != "help" {
			return usageErrorf(path, "unknown command %q", strings.TrimSpace(path+" "+args[0]))
		}
		if cmd.run == nil || isHelp(args) {
			return groupUsage(a, path, cmd, args)
		}
	}
	inv, err := parseLeaf(a, path, cmd, args)
	if err != nil {
		return err
	}
	return cmd.run(ctx, a, inv)
}

// groupUsage answers a group name given without a subcommand.
func groupUsage(a *app, path string, cmd *command, args []string) error {
	if isHelp(args) {
		printGroupUsage(a.stdout, path, cmd)
		return errHelp
	}
	printGroupUsage(a.stderr, path, cmd)
	return usageErrorf(path, "%s needs a subcommand", path)
}

func (c *command) sub(name string) *command {
	for _, s := range c.subs {
		if s.name == name {
			return s
		}
	}
	return nil
}

func isHelp(args []string) bool {
	return len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help")
}

// parseLeaf parses flags, which may come before, between or after the
// positional arguments.
func parseLeaf(a *app, path string, cmd *command, args []string) (*invocation, error) {
	fs := flag.NewFlagSet(path, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if cmd.flags != nil {
		cmd.flags(fs)
	}
	inv := &invocation{path: path, fs: fs}
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printLeafUsage(a.stdout, path, cmd, fs)
				return nil, errHelp
			}
			return nil, usageErrorf(path, "%s: %v", path, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return inv, nil
		}
		inv.args = append(inv.args, args[0])
		args = args[1:]
	}
}

// positional returns the positional arguments, checking their number.
func (inv *invocation) positional(names ...string) ([]string, error) {
	if len(inv.args) != len(names) {
		if len(inv.args) < len(names) {
			return nil, usageErrorf(inv.path, "%s: missing %s", inv.path, names[len(inv.args)])
		}
		return nil, usageErrorf(inv.path, "%s: unexpected argument %q", inv.path, inv.args[len(names)])
	}
	return inv.args, nil
}

// isSet reports whether the flag was given on the command line.
func (inv *invocation) isSet(name string) bool {
	set := false
	inv.fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// require returns a usage error for the first flag left empty.
func (inv *invocation) require(names ...string) error {
	for _, name := range names {
		if inv.fs.Lookup(name).Value.String() == "" {
			return usageErrorf(inv.path, "%s: --%s is required", inv.path, name)
		}
	}
	return nil
}

// arg names a positional argument and where to store it.
type arg struct {
	name string
	dst  *string
}

// check stores the positional arguments in order and checks that the named
// flags are not empty.
func (inv *invocation) check(args []arg, requiredFlags ...string) error {
	names := make([]string, len(args))
	for i, a := range args {
		names[i] = a.name
	}
	values, err := inv.positional(names...)
	if err != nil {
		return err
	}
	for i, a := range args {
		*a.dst = values[i]
	}
	return inv.require(requiredFlags...)
}

// requireSet returns a usage error unless the flag was given (for flags
// whose zero value is meaningful).
func (inv *invocation) requireSet(name string) error {
	if !inv.isSet(name) {
		return usageErrorf(inv.path, "%s: --%s is required", inv.path, name)
	}
	return nil
}

// leaseMS checks a required positive duration flag and converts it to ms.
func (inv *invocation) leaseMS(name string, d time.Duration) (int64, error) {
	if !inv.isSet(name) {
		return 0, usageErrorf(inv.path, "%s: --%s is required (a duration such as 30s)", inv.path, name)
	}
	if d < time.Millisecond {
		return 0, usageErrorf(inv.path, "%s: --%s must be at least 1ms, got %v", inv.path, name, d)
	}
	return d.Milliseconds(), nil
}

// optString, optUint and optBool return a pointer to v when the flag was
// given, nil otherwise, for the optional fields of a request.
func (inv *invocation) optString(name, v string) *string {
	if !inv.isSet(name) {
		return nil
	}
	return &v
}

func (inv *invocation) optUint(name string, v uint64) *uint64 {
	if !inv.isSet(name) {
		return nil
	}
	return &v
}

func (inv *invocation) optBool(name string, v bool) *bool {
	if !inv.isSet(name) {
		return nil
	}
	return &v
}

// jsonFlag is a flag holding a JSON value, checked for validity.
type jsonFlag struct{ raw json.RawMessage }

func (j *jsonFlag) String() string { return string(j.raw) }

func (j *jsonFlag) Set(s string) error {
	if !json.Valid([]byte(s)) {
		return errors.New("not valid JSON")
	}
	j.raw = json.RawMessage(s)
	return nil
}

func tenantFlag(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "tenant", os.Getenv("BATON_TENANT"), "tenant (env BATON_TENANT)")
}

func printRootUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `baton is the command-line client of a Baton cluster.

Usage:
  baton [global flags] COMMAND [SUBCOMMAND] [flags] [args]

Commands:
`)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, c := range rootCommand().subs {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	tw.Flush()
	fmt.Fprint(w, "\nGlobal flags (before COMMAND):\n")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	fmt.Fprint(w, `
Examples:
  baton status
  baton --endpoints http://10.0.0.1:7001 --token "$ADMIN" tenant create acme
  baton --endpoints https://10.0.0.1:7001 --cacert ca.pem status
  baton --output json task list --tenant acme --queue research

Run 'baton COMMAND --help' for the flags of a command.
Exit status: 0 success, 1 refused or unreachable, 2 usage error.
`)
}

func printGroupUsage(w io.Writer, path string, cmd *command) {
	fmt.Fprintf(w, "%s\n\nUsage:\n  baton %s SUBCOMMAND [flags]\n\nSubcommands:\n", cmd.summary, path)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, s := range cmd.subs {
		fmt.Fprintf(tw, "  %s\t%s\n", s.name, s.summary)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nRun 'baton %s SUBCOMMAND --help' for details.\n", path)
}

func printLeafUsage(w io.Writer, path string, cmd *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "%s\n\nUsage:\n  baton %s\n", cmd.summary, cmd.usage)
	hasFlags := false
	fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags {
		fmt.Fprint(w, "\nFlags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	if cmd.examples != "" {
		fmt.Fprintf(w, "\nExamples:\n%s", cmd.examples)
	}
}
