package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/baton-dev/baton/client"
)

func waitpointCommand() *command {
	return &command{
		name:    "waitpoint",
		summary: "Create, wait on and complete waitpoints (approvals, callbacks)",
		examples: `  baton waitpoint create approve-42 --tenant acme --timeout 24h
  baton waitpoint get approve-42 --tenant acme --wait 30s
  baton waitpoint complete approve-42 --tenant acme --payload '{"approved":true}'`,
		subs: []*command{waitpointCreateCommand(), waitpointGetCommand(), waitpointCompleteCommand()},
	}
}

// waitpointCall connects, runs call and prints the waitpoint it returns.
func (a *app) waitpointCall(ctx context.Context, extra time.Duration, call func(context.Context, *client.Client) (*client.Waitpoint, error)) error {
	return a.fetch(ctx, extra, func(ctx context.Context, c *client.Client) error {
		wp, err := call(ctx, c)
		if err != nil {
			return err
		}
		return a.emit(wp, func(w io.Writer) {
			resolved := "-"
			if wp.ResolvedAt != nil {
				resolved = timeText(*wp.ResolvedAt)
			}
			fmt.Fprintf(w, "waitpoint:\t%s\nstate:\t%s\npayload:\t%s\ntask:\t%s\ntimeout at:\t%s\nresolved at:\t%s\n",
				wp.WaitpointID, wp.State, wp.Payload, wp.TaskID, timeText(wp.TimeoutAt), resolved)
		})
	})
}

func waitpointCreateCommand() *command {
	var tenant string
	var timeout time.Duration
	return &command{
		name:     "create",
		summary:  "Create a waitpoint that times out",
		args:     "[ID]",
		examples: "  baton waitpoint create approve-42 --tenant acme --timeout 24h\n",
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.DurationVar(&timeout, "timeout", 0, "time out this long after the create, at most 720h (required)")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var id string
			if len(inv.args) > 0 {
				if err := inv.check([]arg{{"ID", &id}}, "tenant", "timeout"); err != nil {
					return err
				}
			} else if err := inv.check(nil, "tenant", "timeout"); err != nil {
				return err
			}
			if timeout < time.Millisecond {
				return inv.usagef("--timeout must be at least 1ms")
			}
			return a.waitpointCall(ctx, 0, func(ctx context.Context, c *client.Client) (*client.Waitpoint, error) {
				return c.CreateWaitpoint(ctx, tenant, id, timeout)
			})
		},
	}
}

func waitpointGetCommand() *command {
	var tenant string
	var wait time.Duration
	return &command{
		name:     "get",
		summary:  "Show a waitpoint, waiting for it to resolve with --wait",
		args:     "ID",
		examples: "  baton waitpoint get approve-42 --tenant acme --wait 30s\n",
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.DurationVar(&wait, "wait", 0, "wait up to this long (at most 60s) for the waitpoint to be completed or time out")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var id string
			if err := inv.check([]arg{{"ID", &id}}, "tenant"); err != nil {
				return err
			}
			if wait < 0 || wait > time.Minute {
				return inv.usagef("--wait must be between 0 and 60s")
			}
			return a.waitpointCall(ctx, wait, func(ctx context.Context, c *client.Client) (*client.Waitpoint, error) {
				return c.GetWaitpoint(ctx, tenant, id, wait)
			})
		},
	}
}

func waitpointCompleteCommand() *command {
	var tenant string
	var payload jsonFlag
	return &command{
		name:     "complete",
		summary:  "Complete a waitpoint once with a JSON payload",
		args:     "ID",
		long:     "Completing again with the same payload answers as the first time; another payload, or a waitpoint that timed out, is refused.",
		examples: "  baton waitpoint complete approve-42 --tenant acme --payload '{\"approved\":true}'\n",
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.Var(&payload, "payload", "the payload as JSON (default null)")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var id string
			if err := inv.check([]arg{{"ID", &id}}, "tenant"); err != nil {
				return err
			}
			return a.waitpointCall(ctx, 0, func(ctx context.Context, c *client.Client) (*client.Waitpoint, error) {
				return c.CompleteWaitpoint(ctx, tenant, id, payload.raw)
			})
		},
	}
}

func taskWaitCommand() *command {
	var tenant, waitpoint string
	var token fencingToken
	return &command{
		name:     "wait",
		summary:  "Park a task you hold on a waitpoint until it is completed or times out",
		args:     "ID",
		long:     "Ends the lease (its fencing token is retired); the task is claimable again once the waitpoint resolves, and its claim carries the waitpoint's state and payload.",
		examples: "  baton task wait draft-42 --tenant acme --fencing-token 589825 --waitpoint approve-42\n",
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			token.declare(fs, "fencing token of your claim (required)")
			fs.StringVar(&waitpoint, "waitpoint", "", "waitpoint id (required)")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var id string
			if err := inv.check([]arg{{"ID", &id}}, "tenant", "waitpoint"); err != nil {
				return err
			}
			t, err := token.resolve(a, inv, true)
			if err != nil {
				return err
			}
			return a.taskCall(ctx, 0, func(ctx context.Context, c *client.Client) (*client.Task, error) {
				task, err := c.ParkTask(ctx, tenant, id, *t, waitpoint)
				return task, taskRefusal(err, id, "park", nil, nil, t)
			})
		},
	}
}
