// Command baton is the command-line client of a Baton cluster.
//
// Usage:
//
//	baton [global flags] COMMAND [SUBCOMMAND] [flags] [args]
//
// Run "baton --help" for the commands and "baton COMMAND --help" for each.
// Exit status: 0 on success, 1 when the cluster refuses or cannot be
// reached, 2 on a usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/cmd/internal/buildinfo"
)

const defaultEndpoints = "http://127.0.0.1:7001,http://127.0.0.1:7002,http://127.0.0.1:7003"

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
	output         string
	timeout        time.Duration
}

// run executes one invocation and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := &app{stdout: stdout, stderr: stderr}
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version") {
		fmt.Fprintln(stdout, "baton "+buildinfo.Get().String())
		return 0
	}
	rest, err := a.parseGlobal(args)
	if err == nil {
		err = dispatch(ctx, a, rootCommand(), rest)
	}
	return a.exit(err)
}

func (a *app) parseGlobal(args []string) ([]string, error) {
	fs := flag.NewFlagSet("baton", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&a.endpoints, "endpoints", envOr("BATON_ENDPOINTS", defaultEndpoints), "comma-separated node URLs (env BATON_ENDPOINTS)")
	fs.StringVar(&a.token, "token", "", "bearer token (default: env BATON_TOKEN)")
	fs.StringVar(&a.cacert, "cacert", envOr("BATON_CACERT", ""), "CA certificate (PEM) that signed the nodes' certificates, for https endpoints (env BATON_CACERT)")
	fs.StringVar(&a.cert, "cert", envOr("BATON_CERT", ""), "client certificate (PEM), for a cluster that requires one (env BATON_CERT)")
	fs.StringVar(&a.key, "key", envOr("BATON_KEY", ""), "key of --cert (PEM) (env BATON_KEY)")
	fs.StringVar(&a.output, "output", "text", "output format: text or json")
	fs.DurationVar(&a.timeout, "timeout", 30*time.Second, "time limit for the whole command, retries included")
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printRootUsage(a.stdout, fs)
			return nil, errHelp
		}
		return nil, usageErrorf("", "%v", err)
	}
	if a.token == "" {
		a.token = os.Getenv("BATON_TOKEN") // not a flag default: PrintDefaults would show it
	}
	if a.output != "text" && a.output != "json" {
		return nil, usageErrorf("", "--output must be text or json, got %q", a.output)
	}
	if a.timeout <= 0 {
		return nil, usageErrorf("", "--timeout must be positive, got %v", a.timeout)
	}
	if fs.Arg(0) == "help" {
		printRootUsage(a.stdout, fs)
		return nil, errHelp
	}
	if fs.NArg() == 0 {
		printRootUsage(a.stderr, fs)
		return nil, usageErrorf("", "missing command")
	}
	return fs.Args(), nil
}

// client builds the API client from the global flags.
func (a *app) client() (*client.Client, error) {
	var eps []string
	for _, ep := range strings.Split(a.endpoints, ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			eps = append(eps, ep)
		}
	}
	// One command writes once or twice: a random Idempotency-Key per write
	// costs less than opening a client session.
	cfg := client.Config{Endpoints: eps, Token: a.token, NoSession: true,
		Timeout: min(client.DefaultTimeout, a.timeout), MaxRetry: a.timeout,
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

// exit reports err on stderr and maps it to an exit status.
func (a *app) exit(err error) int {
	var uerr *usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.As(err, &uerr):
		fmt.Fprintf(a.stderr, "baton: %s\n", uerr.msg)
		fmt.Fprintf(a.stderr, "Run 'baton %s--help' for usage.\n", prefixed(uerr.path))
		return 2
	}
	fmt.Fprintf(a.stderr, "baton: %v\n", err)
	return 1
}

func prefixed(path string) string {
	if path == "" {
		return ""
	}
	return path + " "
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
