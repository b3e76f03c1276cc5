// Command baton is the command-line client of a Baton cluster.
//
// Usage:
//
//	baton COMMAND [SUBCOMMAND] [args] [flags]
//
// Flags, global or not, may come anywhere after "baton". Run "baton --help"
// for the commands, the environment variables and the exit statuses, and
// "baton help COMMAND" for each command. docs/cli.md describes them all.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-dev/baton/client"
)

// defaultEndpoints are the nodes of a local cluster (make run). Without a
// scheme, so that they are https when a CA or client certificate is given.
const defaultEndpoints = "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// app holds the global settings and output streams of one invocation.
type app struct {
	stdout, stderr io.Writer
	endpoints      string
	token          string
	cacert         string // PEM CA file for https endpoints
	cert, key      string // client certificate and key (mTLS)
	output         string // table, json or yaml
	timeout        time.Duration
	dialTimeout    time.Duration

	args    []string // the command line, for the output format of early errors
	started bool     // a command's run began: later errors are not usage errors
}

// run executes one invocation and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := &app{stdout: stdout, stderr: stderr, output: "table", args: args}
	root := newRoot(a)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetContext(ctx)
	cmd, err := root.ExecuteC()
	if err != nil && !a.started {
		err = asUsage(cmd, err)
	}
	return a.exit(err)
}

// globalFlag is a flag of every command, with its environment variable.
type globalFlag struct {
	name, short, env string
}

// newRoot builds the command tree for one invocation: the flag variables
// each command captures start empty.
func newRoot(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "baton",
		Short: "The command-line client of a Baton cluster",
		Long:  rootLong,
		Example: `  baton status
  baton -e 10.0.0.1:7001 --token "$ADMIN" tenant create acme
  baton status -e https://10.0.0.1:7001 --cacert ca.pem
  baton task list --tenant acme --queue research -o json
  baton help task claim`,
		Version:       buildVersion(),
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE:          groupRun,
	}
	root.SetVersionTemplate("baton {{.Version}}\n")
	root.SetUsageTemplate(usageTemplate)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErrorf(c.CommandPath(), "%v", err)
	})
	cobra.AddTemplateFunc("join", strings.Join)
	pf := root.PersistentFlags()
	pf.StringVarP(&a.endpoints, "endpoints", "e", defaultEndpoints,
		"comma-separated node addresses: host:port or URL; no scheme means https when --cacert or --cert is given, else http")
	pf.StringVar(&a.token, "token", "", "bearer token")
	pf.StringVar(&a.cacert, "cacert", "", "CA certificate (PEM) that signed the nodes' certificates, for https")
	pf.StringVar(&a.cert, "cert", "", "client certificate (PEM), for a cluster that requires one")
	pf.StringVar(&a.key, "key", "", "key of --cert (PEM)")
	pf.StringVarP(&a.output, "output", "o", "table", "output format: table, json or yaml")
	pf.DurationVar(&a.timeout, "timeout", 30*time.Second, "time limit of the command, retries included")
	pf.DurationVar(&a.dialTimeout, "dial-timeout", 3*time.Second, "give up when no endpoint accepts a connection within this long (exit 6)")
	for _, g := range globalFlags {
		setEnv(pf.Lookup(g.name), g.env)
	}
	root.PersistentPreRunE = func(c *cobra.Command, _ []string) error { return a.prepare(c) }

	for _, spec := range commandTree() {
		root.AddCommand(a.build(spec))
	}
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Short = "Print a shell completion script (bash, zsh, fish, powershell)"
			c.PersistentPreRunE = func(*cobra.Command, []string) error { return nil }
		}
	}
	root.SetHelpCommand(&cobra.Command{
		Use:   "help [COMMAND]...",
		Short: "Show the help of a command",
		Long:  "Show the help of any command: baton help task claim.",
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			cmd, _, err := c.Root().Find(args)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []cobra.Completion
			for _, s := range cmd.Commands() {
				if s.IsAvailableCommand() && strings.HasPrefix(s.Name(), toComplete) {
					names = append(names, s.Name())
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || len(rest) > 0 {
				return usageErrorf("help", "unknown command %q for \"baton\"", strings.Join(args, " "))
			}
			return cmd.Help()
		},
	})
	return root
}

const rootLong = `baton is the command-line client of a Baton cluster.

Flags may come anywhere after "baton", before or after the command's
arguments. Put "--" before an argument that starts with "-".

Every global flag has an environment variable, used when the flag is not
given: BATON_ENDPOINTS, BATON_TOKEN, BATON_CACERT, BATON_CERT, BATON_KEY,
BATON_OUTPUT, BATON_TIMEOUT and BATON_DIAL_TIMEOUT; the --tenant of every
command that takes one comes from BATON_TENANT.

Endpoints may be given with a scheme (http://h:7001, https://h:7001) or
without (h:7001): then https when --cacert or --cert is given, http otherwise.

Output: -o table (the default; "text" is the same) for people, -o json or
-o yaml for programs. Every output ends with a newline. With -o json or
-o yaml an error is printed on stdout as the API's error object,
{"error": {"code": ..., "message": ..., details}}, and on stderr in words.

Exit status:
  0  success
  1  any other failure (a file that cannot be read, invalid_argument,
     digest_mismatch, compacted, resource_exhausted, a TLS trust failure, ...)
  2  usage: an unknown command or flag, a missing or malformed argument
  3  conflict: fenced, lease_held, version_mismatch, already_exists,
     idempotency_mismatch, idempotency_expired, referenced
  4  not_found
  5  unauthenticated or forbidden
  6  the cluster cannot answer: unreachable (no endpoint accepted a
     connection within --dial-timeout), unavailable (no leader or no
     quorum), rate_limited after the retries, or --timeout ran out
  7  outcome_unknown: the write was proposed but whether it was applied is
     not known (the retries, with the same key, ran out); check before
     running it again`

// usageTemplate is the help below a command's description: its usage
// line, subcommands, examples and flags.
const usageTemplate = `Usage:
{{- if .HasAvailableSubCommands}}
  {{.CommandPath}} COMMAND [flags]
{{- else}}
  {{.UseLine}}
{{- end}}
{{- if gt (len .Aliases) 0}}

Also called: {{join .Aliases ", "}}
{{- end}}
{{- if .HasAvailableSubCommands}}

Commands:
{{- range .Commands}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding}} {{.Short}}{{end}}{{end}}
{{- end}}
{{- if .HasExample}}

Examples:
{{.Example}}
{{- end}}
{{- if .HasAvailableLocalFlags}}

{{if .HasParent}}Flags:{{else}}Global flags (any command, anywhere on the line):{{end}}
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}
{{- end}}
{{- if .HasAvailableInheritedFlags}}

Global flags:
{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}
{{- end}}
{{- if .HasAvailableSubCommands}}

Run '{{.CommandPath}} COMMAND --help' for the help of a command.
{{- end}}
`

var globalFlags = []globalFlag{
	{"endpoints", "e", "BATON_ENDPOINTS"},
	{"token", "", "BATON_TOKEN"},
	{"cacert", "", "BATON_CACERT"},
	{"cert", "", "BATON_CERT"},
	{"key", "", "BATON_KEY"},
	{"output", "o", "BATON_OUTPUT"},
	{"timeout", "", "BATON_TIMEOUT"},
	{"dial-timeout", "", "BATON_DIAL_TIMEOUT"},
}

// prepare applies the environment to the flags not given and checks the
// global settings, before any command runs.
func (a *app) prepare(c *cobra.Command) error {
	if err := applyEnv(c); err != nil {
		return err
	}
	if a.output == "text" {
		a.output = "table"
	}
	switch a.output {
	case "table", "json", "yaml":
	default:
		if c.CommandPath() == "baton artifact get" && !c.Flags().Changed("file") {
			// "artifact get NAME -o FILE" was the form before -o chose
			// the output format: it keeps working, with a warning.
			fmt.Fprintf(a.stderr, "baton: warning: -o %s is read as --file %s; -o now chooses the output format (table, json or yaml): use --file\n", a.output, a.output)
			if err := c.Flags().Set("file", a.output); err != nil {
				return usageErrorf(c.CommandPath(), "%v", err)
			}
			a.output = "table"
			break
		}
		out := a.output
		a.output = "table"
		return usageErrorf(c.CommandPath(), "--output (or BATON_OUTPUT) must be table, json or yaml, got %q", out)
	}
	if a.timeout <= 0 {
		return usageErrorf(c.CommandPath(), "--timeout must be positive, got %v", a.timeout)
	}
	if a.dialTimeout <= 0 {
		return usageErrorf(c.CommandPath(), "--dial-timeout must be positive, got %v", a.dialTimeout)
	}
	return nil
}

// client builds the API client from the global flags.
func (a *app) client() (*client.Client, error) {
	eps, err := a.endpointURLs()
	if err != nil {
		return nil, err
	}
	// One command writes once or twice: a random Idempotency-Key per write
	// costs less than opening a client session.
	cfg := client.Config{Endpoints: eps, Token: a.token, NoSession: true,
		Timeout: min(client.DefaultTimeout, a.timeout), MaxRetry: a.timeout, DialRetry: a.dialTimeout,
		CAFile: a.cacert, CertFile: a.cert, KeyFile: a.key}
	if err := cfg.Validate(); err != nil {
		if strings.Contains(err.Error(), "endpoint") {
			return nil, usageErrorf("", "--endpoints: %v", err)
		}
		return nil, usageErrorf("", "--cert/--key: %v", err)
	}
	c, err := client.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("%v", err) // a certificate file that cannot be read
	}
	return c, nil
}

// endpointURLs returns --endpoints as URLs: an address without a scheme
// gets https when a CA or client certificate is configured, http otherwise.
func (a *app) endpointURLs() ([]string, error) {
	var eps []string
	for _, ep := range strings.Split(a.endpoints, ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			eps = append(eps, a.endpointURL(ep))
		}
	}
	if len(eps) == 0 {
		return nil, usageErrorf("", "--endpoints is empty: give host:port or URLs, comma-separated")
	}
	return eps, nil
}

// connect returns the client and a context bounded by --timeout plus extra
// (a wait the server may legitimately take, as in queue claim --wait).
func (a *app) connect(ctx context.Context, extra time.Duration) (*client.Client, context.Context, context.CancelFunc, error) {
	c, err := a.client()
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout+extra)
	return c, ctx, cancel, nil
}

// fetch connects and runs call, which makes the request and emits the
// answer, within --timeout plus extra.
func (a *app) fetch(ctx context.Context, extra time.Duration, call func(context.Context, *client.Client) error) error {
	c, ctx, cancel, err := a.connect(ctx, extra)
	if err != nil {
		return err
	}
	defer cancel()
	return call(ctx, c)
}

// write runs a call that returns no object and reports it with emitDone.
func (a *app) write(ctx context.Context, done string, call func(context.Context, *client.Client, client.RequestOption) error) error {
	return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
		var meta client.Meta
		if err := call(ctx, c, client.CaptureMeta(&meta)); err != nil {
			return err
		}
		return a.emitDone(meta, done)
	})
}
