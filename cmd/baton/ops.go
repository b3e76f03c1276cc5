package main

import (
	"context"
	"fmt"
	"github.com/spf13/pflag"
	"io"

	"github.com/baton-dev/baton/client"
)

func opCommand() *command {
	return &command{
		name:    "op",
		summary: "Inspect and settle the ledger of external operations",
		examples: `  baton op begin notify:report-42 --tenant acme --kind email.send --params '{"to":"ops@example.com"}'
  baton op finish notify:report-42 --tenant acme --state succeeded
  baton op get notify:report-42 --tenant acme`,
		subs: []*command{opGetCommand(), opBeginCommand(), opFinishCommand()},
	}
}

// opCall connects, runs call and prints the op it returns.
func (a *app) opCall(ctx context.Context, call func(context.Context, *client.Client) (*client.Op, error)) error {
	return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
		op, err := call(ctx, c)
		if err != nil {
			return err
		}
		return a.emit(op, func(w io.Writer) { printOp(w, op) })
	})
}

func opGetCommand() *command {
	var tenant string
	var stale bool
	return &command{
		name:     "get",
		summary:  "Show an operation's record",
		args:     "OPID",
		examples: "  baton op get notify:report-42 --tenant acme\n",
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			staleFlag(fs, &stale)
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var id string
			if err := inv.check([]arg{{"OPID", &id}}, "tenant"); err != nil {
				return err
			}
			return a.opCall(ctx, func(ctx context.Context, c *client.Client) (*client.Op, error) {
				return c.GetOp(ctx, tenant, id, readOpts(stale)...)
			})
		},
	}
}

func opBeginCommand() *command {
	var tenant, digest string
	var req client.BeginOpRequest
	var params jsonFlag
	var fence fenceFlags
	return &command{
		name:    "begin",
		summary: "Record that an operation is starting (or show the existing record)",
		args:    "OPID",
		long: `--params is hashed as the Go client's Once does (sha256 of canonical JSON),
so a record begun here matches one begun by concurrency.Once with equal params.
Prints the record with "created": false when it already existed.`,
		examples: `  baton op begin notify:report-42 --tenant acme --kind email.send --params '{"to":"ops@example.com"}'`,
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.StringVar(&req.Kind, "kind", "", "kind of operation, e.g. email.send (required)")
			fs.Var(&params, "params", "the operation's parameters as JSON; their digest is recorded")
			fs.StringVar(&digest, "params-digest", "", "the params digest itself, instead of --params")
			fs.StringVar(&req.TaskID, "task-id", "", "task on whose behalf the operation runs")
			fence.declare(fs)
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var id string
			if err := inv.check([]arg{{"OPID", &id}}, "tenant", "kind"); err != nil {
				return err
			}
			var err error
			if req.ParamsDigest, err = opDigest(inv, params, digest); err != nil {
				return err
			}
			if req.Fence, err = fence.fence(inv); err != nil {
				return err
			}
			return a.opBegin(ctx, tenant, id, req)
		},
	}
}

// opDigest returns the digest of --params, or --params-digest.
func opDigest(inv *invocation, params jsonFlag, digest string) (string, error) {
	switch {
	case params.raw != nil && digest != "":
		return "", inv.usagef("give --params or --params-digest, not both")
	case digest != "":
		return digest, nil
	case params.raw == nil:
		return "", inv.usagef("--params or --params-digest is required")
	}
	return client.ParamsDigest(params.raw)
}

func (a *app) opBegin(ctx context.Context, tenant, id string, req client.BeginOpRequest) error {
	c, ctx, cancel, err := a.connect(ctx, 0)
	if err != nil {
		return err
	}
	defer cancel()
	op, created, err := c.BeginOp(ctx, tenant, id, req)
	if err != nil {
		return fenceRefusal(err, req.Fence, "begin")
	}
	out := struct {
		*client.Op
		Created bool `json:"created"`
	}{op, created}
	return a.emit(out, func(w io.Writer) {
		if created {
			fmt.Fprintf(w, "began op %s\n", id)
		} else {
			fmt.Fprintf(w, "op %s already exists\n", id)
		}
		printOp(w, op)
	})
}

func opFinishCommand() *command {
	var tenant string
	var req client.FinishOpRequest
	var result jsonFlag
	var fence fenceFlags
	return &command{
		name:    "finish",
		summary: "Record an operation's outcome (settle one left started or unknown)",
		args:    "OPID",
		long: `A succeeded or failed op never changes again (version_mismatch, exit 3);
an unknown one may later become succeeded or failed.`,
		examples: `  baton op finish notify:report-42 --tenant acme --state succeeded --result '{"message_id":"m-1"}'`,
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.StringVar(&req.State, "state", "", "succeeded, failed or unknown (required)")
			fs.Var(&result, "result", "the outcome as JSON")
			fence.declare(fs)
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var id string
			if err := inv.check([]arg{{"OPID", &id}}, "tenant", "state"); err != nil {
				return err
			}
			switch req.State {
			case client.OpSucceeded, client.OpFailed, client.OpUnknown:
			default:
				return inv.usagef("--state must be succeeded, failed or unknown, got %q", req.State)
			}
			req.Result = result.raw
			var err error
			if req.Fence, err = fence.fence(inv); err != nil {
				return err
			}
			return a.opCall(ctx, func(ctx context.Context, c *client.Client) (*client.Op, error) {
				op, err := c.FinishOp(ctx, tenant, id, req)
				return op, fenceRefusal(err, req.Fence, "finish")
			})
		},
	}
}

func printOp(w io.Writer, op *client.Op) {
	rows := [][2]string{
		{"op", op.OpID}, {"kind", op.Kind}, {"state", op.State}, {"params digest", op.ParamsDigest},
		{"task", dash(op.TaskID)}, {"result", rawText(op.Result)},
		{"created", timeText(op.CreatedAt)}, {"updated", timeText(op.UpdatedAt)},
	}
	for _, r := range rows {
		fmt.Fprintf(w, "%s:\t%s\n", r[0], r[1])
	}
}
