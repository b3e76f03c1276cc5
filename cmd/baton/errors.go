package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/baton-dev/baton/client"
)

// Exit statuses; rootLong and docs/cli.md list them for users.
const (
	exitOK          = 0
	exitFailure     = 1 // anything not below
	exitUsage       = 2 // the command line is wrong
	exitConflict    = 3 // a condition of the request does not hold
	exitNotFound    = 4
	exitAuth        = 5 // unauthenticated, forbidden
	exitUnavailable = 6 // the cluster cannot answer now; nothing was done (else exitUnknown)
	exitUnknown     = 7 // a write was sent and its outcome is not known
)

// exitCodes maps the API's error codes to exit statuses; codes not listed
// exit with exitFailure.
var exitCodes = map[string]int{
	"fenced":               exitConflict,
	"lease_held":           exitConflict,
	"version_mismatch":     exitConflict,
	"already_exists":       exitConflict,
	"idempotency_mismatch": exitConflict,
	"idempotency_expired":  exitConflict,
	"referenced":           exitConflict,
	"not_found":            exitNotFound,
	"unauthenticated":      exitAuth,
	"forbidden":            exitAuth,
	"unavailable":          exitUnavailable,
	"rate_limited":         exitUnavailable,
	"outcome_unknown":      exitUnknown,
}

// exitCode is the exit status of err.
func exitCode(err error) int {
	var uerr *usageError
	var aerr *client.Error
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &uerr):
		return exitUsage
	case errors.Is(err, client.ErrOutcomeUnknown):
		// Also a write whose retries ran out after an attempt that got no
		// answer (its last answer may be a 503): it may have been applied.
		return exitUnknown
	case errors.As(err, &aerr) && aerr.Code != "":
		if code, ok := exitCodes[aerr.Code]; ok {
			return code
		}
		return exitFailure
	case errors.Is(err, client.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return exitUnavailable
	}
	return exitFailure
}

// refusal is an API error told in words: what the command expected and
// what it found. Its message replaces the server's on stderr; with -o json
// the API's error object is printed as the server sent it.
type refusal struct {
	err error // a *client.Error
	msg string
}

func (r *refusal) Error() string { return r.msg }
func (r *refusal) Unwrap() error { return r.err }

// reported is an error the command's answer on stdout already holds (as
// baton version's server_error): exit prints it on stderr only.
type reported struct{ err error }

func (r *reported) Error() string { return r.err.Error() }
func (r *reported) Unwrap() error { return r.err }

// reword returns err with msg(e) as its message when err is an API error
// with the given code and msg has something to say ("" keeps the server's
// words).
func reword(err error, code string, msg func(e *client.Error) string) error {
	var aerr *client.Error
	if !errors.As(err, &aerr) || aerr.Code != code {
		return err
	}
	if m := msg(aerr); m != "" {
		return &refusal{err: err, msg: m}
	}
	return err
}

// exit reports err on stderr (and, with -o json or yaml, as an error
// object on stdout) and returns its exit status.
func (a *app) exit(err error) int {
	if err == nil {
		return exitOK
	}
	code := exitCode(err)
	var rep *reported
	if format := a.errorFormat(); format != "table" && !errors.As(err, &rep) {
		if e := a.encode(format, errorObject(err, code)); e != nil {
			fmt.Fprintf(a.stderr, "baton: %v\n", e)
		}
	}
	fmt.Fprintf(a.stderr, "baton: %s\n", errorText(err, code, a))
	var uerr *usageError
	if errors.As(err, &uerr) {
		fmt.Fprintf(a.stderr, "Run '%s --help' for usage.\n", strings.TrimSpace(cmp(uerr.path, "baton")))
	}
	return code
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// errorText is the one line printed on stderr: "code: words".
func errorText(err error, code int, a *app) string {
	var r *refusal
	var aerr *client.Error
	switch {
	case errors.As(err, &r) && errors.As(err, &aerr):
		return aerr.Code + ": " + r.msg
	case errors.As(err, &aerr):
		return err.Error()
	case code == exitUnavailable && errors.Is(err, client.ErrUnavailable):
		return "unavailable: no node answered (endpoints " + a.endpoints + "): " +
			strings.TrimPrefix(err.Error(), "unavailable: ")
	case code == exitUnavailable:
		return fmt.Sprintf("unavailable: no answer within --timeout %v (endpoints %s): %v", a.timeout, a.endpoints, err)
	}
	return err.Error()
}

// errorObject is the error as the API writes it: {"error": {"code",
// "message", details...}}. Errors of the CLI itself have the codes
// "usage", "unavailable" (no node answered) and "cli_error".
func errorObject(err error, code int) map[string]any {
	obj := map[string]any{}
	var aerr *client.Error
	switch {
	case errors.As(err, &aerr) && aerr.Code != "":
		for k, v := range aerr.Details {
			obj[k] = v
		}
		obj["code"], obj["message"] = aerr.Code, aerr.Message
		return map[string]any{"error": obj}
	case code == exitUsage:
		obj["code"] = "usage"
	case code == exitUnavailable:
		obj["code"] = "unavailable"
	default:
		obj["code"] = "cli_error"
	}
	obj["message"] = err.Error()
	return map[string]any{"error": obj}
}

// errorFormat is the output format for an error: --output when it was
// read, else what the command line or BATON_OUTPUT says (an unknown
// command stops cobra before it parses the flags).
func (a *app) errorFormat() string {
	if a.output == "json" || a.output == "yaml" {
		return a.output
	}
	format := ""
	for i, arg := range a.args {
		if arg == "--" {
			break
		}
		switch {
		case (arg == "-o" || arg == "--output") && i+1 < len(a.args):
			format = a.args[i+1]
		case strings.HasPrefix(arg, "--output="):
			format = strings.TrimPrefix(arg, "--output=")
		case strings.HasPrefix(arg, "-o") && !strings.HasPrefix(arg, "--"):
			format = strings.TrimPrefix(strings.TrimPrefix(arg, "-o"), "=")
		}
	}
	if format == "" {
		format = os.Getenv("BATON_OUTPUT")
	}
	if format == "json" || format == "yaml" {
		return format
	}
	return "table"
}
