package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// command describes one node of the command tree: a group with
// subcommands, a leaf with a run function, or both (run handles the bare
// group name). build turns it into a cobra command.
type command struct {
	name     string
	aliases  []string // other names, among them the verbs of older releases
	args     string   // the positional arguments for the usage line, e.g. "ID"
	summary  string   // one line
	long     string   // notes printed under the summary in the help
	examples string
	flags    func(fs *pflag.FlagSet) // declares the leaf's flags
	run      func(ctx context.Context, a *app, inv *invocation) error
	subs     []*command
}

// invocation is a parsed command line of a leaf.
type invocation struct {
	path string // e.g. "baton task claim", for messages
	fs   *pflag.FlagSet
	args []string // positional arguments
}

// build returns the cobra command of spec and its subcommands.
func (a *app) build(spec *command) *cobra.Command {
	c := &cobra.Command{
		Use:     strings.TrimSpace(spec.name + " " + spec.args),
		Aliases: spec.aliases,
		Short:   spec.summary,
		Example: strings.TrimRight(spec.examples, "\n"),

		SuggestionsMinimumDistance: 2,
	}
	if spec.long != "" {
		c.Long = spec.summary + ".\n\n" + strings.TrimRight(spec.long, "\n")
	}
	if spec.flags != nil {
		spec.flags(c.Flags())
	}
	for _, s := range spec.subs {
		c.AddCommand(a.build(s))
	}
	switch {
	case spec.run != nil:
		c.Args = cobra.ArbitraryArgs // checked by inv.check, with the argument's name
		c.RunE = func(c *cobra.Command, args []string) error {
			if len(spec.subs) > 0 && len(args) > 0 {
				return groupRun(c, args)
			}
			a.started = true
			inv := &invocation{path: c.CommandPath(), fs: c.Flags(), args: args}
			return spec.run(c.Context(), a, inv)
		}
	case len(spec.subs) > 0:
		c.RunE = groupRun
	}
	return c
}

// groupRun answers a group name given without a known subcommand.
func groupRun(c *cobra.Command, args []string) error {
	if len(args) > 0 && args[0] == "help" {
		return c.Help()
	}
	if len(args) > 0 {
		msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			for i := range s {
				s[i] = strconv.Quote(s[i])
			}
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return usageErrorf(c.CommandPath(), "%s", msg)
	}
	c.SetOut(c.ErrOrStderr())
	_ = c.Usage()
	if !c.HasParent() {
		return usageErrorf("", "missing command")
	}
	return usageErrorf(c.CommandPath(), "%s needs a subcommand", strings.TrimPrefix(c.CommandPath(), "baton "))
}

// usageError is a mistake on the command line: exit status 2.
type usageError struct {
	path string // the command, e.g. "baton task get", for the help hint
	msg  string
}

func (e *usageError) Error() string { return e.msg }

func usageErrorf(path, format string, args ...any) error {
	return &usageError{path: path, msg: fmt.Sprintf(format, args...)}
}

// asUsage makes an error cobra returned before any command ran (an unknown
// command or flag, a bad flag value) a usage error.
func asUsage(cmd *cobra.Command, err error) error {
	var uerr *usageError
	if errors.As(err, &uerr) {
		return err
	}
	path := ""
	if cmd != nil {
		path = cmd.CommandPath()
	}
	return &usageError{path: path, msg: err.Error()}
}

// positional returns the positional arguments, checking their number.
func (inv *invocation) positional(names ...string) ([]string, error) {
	if len(inv.args) != len(names) {
		if len(inv.args) < len(names) {
			return nil, inv.usagef("missing %s", names[len(inv.args)])
		}
		return nil, inv.usagef("unexpected argument %q", inv.args[len(names)])
	}
	return inv.args, nil
}

// usagef is a usage error of this command, its message prefixed with the
// command's name ("task get: missing ID").
func (inv *invocation) usagef(format string, args ...any) error {
	name := strings.TrimPrefix(inv.path, "baton ")
	return usageErrorf(inv.path, "%s: %s", name, fmt.Sprintf(format, args...))
}

// isSet reports whether the flag was given (on the command line or by its
// environment variable).
func (inv *invocation) isSet(name string) bool {
	return inv.fs.Changed(name)
}

// require returns a usage error for the first flag left empty.
func (inv *invocation) require(names ...string) error {
	for _, name := range names {
		if inv.fs.Lookup(name).Value.String() == "" {
			return inv.usagef("--%s is required", name)
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

// nameArg stores the one positional argument NAME in dst, or takes it from
// the flag of the same meaning (--name, the form of older releases).
func (inv *invocation) nameArg(dst *string, flag string) error {
	switch {
	case len(inv.args) == 0 && *dst == "":
		return inv.usagef("missing NAME")
	case len(inv.args) == 0:
		return nil
	case len(inv.args) > 1:
		return inv.usagef("unexpected argument %q", inv.args[1])
	case inv.isSet(flag) && *dst != inv.args[0]:
		return inv.usagef("NAME %q and --%s %q differ: give one", inv.args[0], flag, *dst)
	}
	*dst = inv.args[0]
	return nil
}

// requireSet returns a usage error unless the flag was given (for flags
// whose zero value is meaningful).
func (inv *invocation) requireSet(name string) error {
	if !inv.isSet(name) {
		return inv.usagef("--%s is required", name)
	}
	return nil
}

// requiredLease checks a required duration flag of at least 1ms.
func (inv *invocation) requiredLease(name string, d time.Duration) (time.Duration, error) {
	if !inv.isSet(name) {
		return 0, inv.usagef("--%s is required (a duration such as 30s)", name)
	}
	if d < time.Millisecond {
		return 0, inv.usagef("--%s must be at least 1ms, got %v", name, d)
	}
	return d, nil
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
func (j *jsonFlag) Type() string   { return "json" }

func (j *jsonFlag) Set(s string) error {
	if !json.Valid([]byte(s)) {
		return errors.New("not valid JSON")
	}
	j.raw = json.RawMessage(s)
	return nil
}

// envAnnotation marks a flag with the environment variable that sets it
// when it is not given.
const envAnnotation = "baton_env"

func setEnv(f *pflag.Flag, env string) {
	if f.Annotations == nil {
		f.Annotations = map[string][]string{}
	}
	f.Annotations[envAnnotation] = []string{env}
	f.Usage += " (env " + env + ")"
}

// applyEnv sets each flag of c that was not given from its environment
// variable, if that is set.
func applyEnv(c *cobra.Command) error {
	var err error
	apply := func(fs *pflag.FlagSet) {
		fs.VisitAll(func(f *pflag.Flag) {
			env := f.Annotations[envAnnotation]
			if err != nil || len(env) == 0 || f.Changed {
				return
			}
			v, ok := os.LookupEnv(env[0])
			if !ok || v == "" {
				return
			}
			if e := fs.Set(f.Name, v); e != nil {
				err = usageErrorf(c.CommandPath(), "%s=%q: %v", env[0], v, e)
			}
		})
	}
	apply(c.Flags())
	// The root's own flags too: a command's flag of the same name (the
	// --token of task update) hides the global one from c.Flags().
	apply(c.Root().PersistentFlags())
	return err
}

func tenantFlag(fs *pflag.FlagSet, p *string) {
	fs.StringVar(p, "tenant", "", "tenant")
	setEnv(fs.Lookup("tenant"), "BATON_TENANT")
}

// staleFlag is the --stale of the reads.
func staleFlag(fs *pflag.FlagSet, p *bool) {
	fs.BoolVar(p, "stale", false, "read from the answering node's local state (may lag the leader)")
}
