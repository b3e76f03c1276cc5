package main

import (
	"context"
	"fmt"
	"github.com/spf13/pflag"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/baton-dev/baton/client"
)

func taskCommand() *command {
	return &command{
		name:    "task",
		aliases: []string{"tasks"},
		summary: "Create, inspect, claim and update tasks",
		examples: `  baton task create --tenant acme --queue research --id report-42
  baton task claim report-42 --tenant acme --owner worker-1 --lease 30s
  baton task list --tenant acme --queue research`,
		subs: []*command{taskCreateCommand(), taskGetCommand(), taskListCommand(), taskClaimCommand(),
			taskRenewCommand(), taskUpdateCommand(), taskReleaseCommand(), taskFailCommand(), taskRetryCommand(),
			taskCancelCommand(), taskDepsCommand(), taskWaitCommand(), taskDeleteCommand()},
	}
}

func queueCommand() *command {
	return &command{
		name:     "queue",
		summary:  "Claim the next task of a queue; its lifecycle defaults; its statistics",
		examples: "  baton queue claim research --tenant acme --owner worker-1 --lease 30s\n  baton queue policy set research --tenant acme --max-attempts 5\n  baton queue stats research --tenant acme\n",
		subs:     []*command{queueClaimCommand(), queuePolicyCommand(), queueStatsCommand(), queueListCommand()},
	}
}

// taskCall connects, runs call and prints the task it returns.
func (a *app) taskCall(ctx context.Context, extra time.Duration, call func(context.Context, *client.Client) (*client.Task, error)) error {
	return a.fetch(ctx, extra, func(ctx context.Context, c *client.Client) error {
		t, err := call(ctx, c)
		if err != nil {
			return err
		}
		return a.emit(t, func(w io.Writer) { printTask(w, t) })
	})
}

func taskCreateCommand() *command {
	var tenant string
	var req client.CreateTaskRequest
	var priority int64
	var payload jsonFlag
	var backoffInitial, backoffMax time.Duration
	var when availabilityFlags
	return &command{
		name:    "create",
		summary: "Create a task",
		examples: `  baton task create --tenant acme --queue research --id report-42 --payload '{"topic":"raft"}'
  baton task create --tenant acme --queue research --max-attempts 5 --backoff-initial 1s --backoff-max 5m --delay 10m
  baton task create --tenant acme --queue review --id review-42 --depends-on report-42,figures-42
`,
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.StringVar(&req.Queue, "queue", "", "queue (required)")
			fs.StringVar(&req.TaskID, "id", "", "task id (default: generated)")
			fs.StringVar(&req.Status, "status", "", "initial status (default pending)")
			fs.Int64Var(&priority, "priority", 0, "priority; higher is claimed first")
			fs.Var(&payload, "payload", "payload as JSON")
			fs.Uint64Var(&req.MaxAttempts, "max-attempts", 0, "claims before the task is dead after a failure (default unlimited)")
			fs.DurationVar(&backoffInitial, "backoff-initial", 0, "backoff after the first failed attempt, doubling after each (default: the server's, 1s)")
			fs.DurationVar(&backoffMax, "backoff-max", 0, "cap of the backoff (default: the server's, 5m)")
			fs.DurationVar(&req.Retention, "retention", 0, "delete the task this long after it is done, dead or cancelled (default: the queue's)")
			fs.StringSliceVar(&req.DependsOn, "depends-on", nil, "tasks that must be done before this one is claimable (comma-separated ids)")
			fs.StringVar(&req.DependencyPolicy, "dependency-policy", "", "what a dependency that ends dead or cancelled does: fail (default), cancel or ignore")
			fs.StringVar(&req.ConcurrencyKey, "concurrency-key", "", "group for the queue's concurrency-key limit (a customer id, say)")
			when.declare(fs, "create")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if err := inv.check(nil, "tenant", "queue"); err != nil {
				return err
			}
			if inv.isSet("priority") {
				req.Priority = &priority
			}
			if backoffInitial < 0 || backoffMax < 0 || req.Retention < 0 {
				return inv.usagef("--backoff-initial, --backoff-max and --retention must not be negative")
			}
			req.BackoffInitial, req.BackoffMax = backoffInitial, backoffMax
			var err error
			if req.AvailableAt, req.Delay, err = when.resolve(inv); err != nil {
				return err
			}
			req.Payload = payload.raw
			return a.taskCall(ctx, 0, func(ctx context.Context, c *client.Client) (*client.Task, error) {
				return c.CreateTask(ctx, tenant, req)
			})
		},
	}
}

func taskGetCommand() *command {
	var tenant string
	var stale bool
	return &command{
		name:     "get",
		summary:  "Show one task",
		args:     "ID",
		examples: "  baton task get report-42 --tenant acme\n",
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			staleFlag(fs, &stale)
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var id string
			if err := inv.check([]arg{{"ID", &id}}, "tenant"); err != nil {
				return err
			}
			return a.taskCall(ctx, 0, func(ctx context.Context, c *client.Client) (*client.Task, error) {
				return c.GetTask(ctx, tenant, id, readOpts(stale)...)
			})
		},
	}
}

func taskListCommand() *command {
	var tenant string
	var f client.ListTasksOptions
	var stale bool
	return &command{
		name:     "list",
		aliases:  listAliases,
		summary:  "List tasks, one page at a time",
		examples: "  baton task list --tenant acme --queue research --status pending --limit 20\n",
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.StringVar(&f.Queue, "queue", "", "only this queue")
			fs.StringVar(&f.Status, "status", "", "only this status")
			fs.StringVar(&f.Owner, "owner", "", "only this owner")
			fs.IntVar(&f.Limit, "limit", 0, "page size (default: the server's)")
			fs.StringVar(&f.PageToken, "page-token", "", "continue after a previous page")
			staleFlag(fs, &stale)
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if err := inv.check(nil, "tenant"); err != nil {
				return err
			}
			return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
				list, err := firstFilledPage(f.PageToken, func(token string) (*client.TaskList, error) {
					page := f
					page.PageToken = token
					return c.ListTasks(ctx, tenant, page, readOpts(stale)...)
				}, func(l *client.TaskList) (int, string) { return len(l.Tasks), l.NextPageToken })
				if err != nil {
					return err
				}
				return a.emit(list, func(w io.Writer) { printTaskList(w, list) })
			})
		},
	}
}

func printTaskList(w io.Writer, list *client.TaskList) {
	printTaskTable(w, list.Tasks)
	if list.NextPageToken != "" {
		fmt.Fprintf(w, "\nmore: --page-token %s\n", list.NextPageToken)
	}
}

func taskClaimCommand() *command {
	var tenant, expectStatus, setStatus string
	var req client.ClaimRequest
	var lease time.Duration
	var expectVersion uint64
	return &command{
		name:     "claim",
		summary:  "Lease one task and print it with its new fencing token",
		args:     "ID",
		examples: "  baton task claim report-42 --tenant acme --owner worker-1 --lease 30s --set-status running\n",
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.StringVar(&req.Owner, "owner", "", "owner of the lease (required)")
			fs.DurationVar(&lease, "lease", 0, "lease duration, e.g. 30s (required)")
			fs.StringVar(&expectStatus, "expect-status", "", "claim only in this status")
			fs.Uint64Var(&expectVersion, "expect-version", 0, "claim only at this version")
			fs.StringVar(&setStatus, "set-status", "", "status to set on claim")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var id string
			if err := inv.check([]arg{{"ID", &id}}, "tenant", "owner"); err != nil {
				return err
			}
			var err error
			if req.Lease, err = inv.requiredLease("lease", lease); err != nil {
				return err
			}
			req.ExpectStatus = inv.optString("expect-status", expectStatus)
			req.SetStatus = inv.optString("set-status", setStatus)
			req.ExpectVersion = inv.optUint("expect-version", expectVersion)
			return a.taskCall(ctx, 0, func(ctx context.Context, c *client.Client) (*client.Task, error) {
				t, err := c.ClaimTask(ctx, tenant, id, req)
				return t, taskRefusal(err, id, "claim", req.ExpectVersion, req.ExpectStatus, nil)
			})
		},
	}
}

func taskRenewCommand() *command {
	var tenant string
	var req client.RenewRequest
	var lease time.Duration
	var token fencingToken
	return &command{
		name:     "renew",
		summary:  "Extend a lease you hold",
		args:     "ID",
		examples: "  baton task renew report-42 --tenant acme --token 57 --lease 30s\n",
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			token.declare(fs, "fencing token of your claim (required)")
			fs.DurationVar(&lease, "lease", 0, "new lease duration from now, e.g. 30s (required)")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			id, t, err := token.withTaskID(a, inv)
			if err != nil {
				return err
			}
			req.FencingToken = *t
			if req.Lease, err = inv.requiredLease("lease", lease); err != nil {
				return err
			}
			return a.taskCall(ctx, 0, func(ctx context.Context, c *client.Client) (*client.Task, error) {
				t, err := c.RenewTask(ctx, tenant, id, req)
				return t, taskRefusal(err, id, "renewal", nil, nil, &req.FencingToken)
			})
		},
	}
}

func taskUpdateCommand() *command {
	var tenant, status, expectStatus, artifact string
	var expectVersion uint64
	var token fencingToken
	var result, payload jsonFlag
	var release bool
	return &command{
		name:    "update",
		summary: "Change a task's status, result, payload or artifact",
		args:    "ID",
		examples: `  baton task update report-42 --tenant acme --token 57 --status done --result '{"ok":true}' --release
  baton task update report-42 --tenant acme --expect-version 3 --status cancelled
`,
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			token.declare(fs, "fencing token: apply only under this claim")
			fs.StringVar(&status, "status", "", "new status")
			fs.Var(&result, "result", "result as JSON")
			fs.Var(&payload, "payload", "new payload as JSON")
			fs.StringVar(&artifact, "artifact-id", "", "artifact id to attach")
			fs.Uint64Var(&expectVersion, "expect-version", 0, "apply only at this version")
			fs.StringVar(&expectStatus, "expect-status", "", "apply only in this status")
			fs.BoolVar(&release, "release", false, "clear owner and lease in the same step")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var id string
			if err := inv.check([]arg{{"ID", &id}}, "tenant"); err != nil {
				return err
			}
			t, err := token.resolve(a, inv, false)
			if err != nil {
				return err
			}
			req := client.UpdateTaskRequest{
				FencingToken:  t,
				ExpectVersion: inv.optUint("expect-version", expectVersion),
				ExpectStatus:  inv.optString("expect-status", expectStatus),
				Status:        inv.optString("status", status),
				ArtifactID:    inv.optString("artifact-id", artifact),
				Result:        result.raw,
				Payload:       payload.raw,
				Release:       inv.optBool("release", release),
			}
			return a.taskCall(ctx, 0, func(ctx context.Context, c *client.Client) (*client.Task, error) {
				t, err := c.UpdateTask(ctx, tenant, id, req)
				return t, taskRefusal(err, id, "update", req.ExpectVersion, req.ExpectStatus, req.FencingToken)
			})
		},
	}
}

func taskReleaseCommand() *command {
	var tenant, status string
	var token fencingToken
	var when availabilityFlags
	return &command{
		name:     "release",
		summary:  "Give up a lease you hold (update with release)",
		args:     "ID",
		examples: "  baton task release report-42 --tenant acme --token 57 --status pending\n",
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			token.declare(fs, "fencing token of your claim (required)")
			fs.StringVar(&status, "status", "", "status to set while releasing")
			when.declare(fs, "release")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			id, t, err := token.withTaskID(a, inv)
			if err != nil {
				return err
			}
			yes := true
			req := client.UpdateTaskRequest{FencingToken: t, Status: inv.optString("status", status), Release: &yes}
			if req.AvailableAt, req.Delay, err = when.resolve(inv); err != nil {
				return err
			}
			return a.taskCall(ctx, 0, func(ctx context.Context, c *client.Client) (*client.Task, error) {
				t, err := c.UpdateTask(ctx, tenant, id, req)
				return t, taskRefusal(err, id, "release", nil, nil, req.FencingToken)
			})
		},
	}
}

func taskFailCommand() *command {
	var tenant string
	var token fencingToken
	var req client.FailTaskRequest
	return &command{
		name:    "fail",
		summary: "End the attempt you hold as failed: retried after its backoff, or dead",
		args:    "ID",
		long: `Gives the lease back and keeps --error on the task. The task is claimable
again after its backoff, unless it has used its --max-attempts claims or
--non-retryable is given: then its status is dead, which no queue claim
takes (see baton task retry; list them with baton task list --status dead).`,
		examples: `  baton task fail report-42 --tenant acme --fencing-token 589825 --error "upstream returned 502"
  baton task fail report-42 --tenant acme --fencing-token 589825 --error "bad input" --non-retryable
`,
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			token.declare(fs, "fencing token of your claim (required)")
			fs.StringVar(&req.Error, "error", "", "what went wrong (kept as last_error)")
			fs.BoolVar(&req.NonRetryable, "non-retryable", false, "make the task dead at once")
			fs.StringVar(&req.Status, "status", "", "status to go back to when retried (default pending)")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			id, t, err := token.withTaskID(a, inv)
			if err != nil {
				return err
			}
			req.FencingToken = *t
			return a.taskCall(ctx, 0, func(ctx context.Context, c *client.Client) (*client.Task, error) {
				t, err := c.FailTask(ctx, tenant, id, req)
				return t, taskRefusal(err, id, "failure", nil, nil, &req.FencingToken)
			})
		},
	}
}

func taskRetryCommand() *command {
	var tenant, status string
	var expectVersion uint64
	var when availabilityFlags
	return &command{
		name:    "retry",
		summary: "Put a task (a dead one, say) back to pending with its attempts reset",
		args:    "ID",
		long:    "Needs write access to the task's queue. Refused while someone holds a live lease on the task.",
		examples: `  baton task retry report-42 --tenant acme
  baton task retry report-42 --tenant acme --delay 1h
`,
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.StringVar(&status, "status", "", "status to put the task in (default pending)")
			fs.Uint64Var(&expectVersion, "expect-version", 0, "retry only at this version")
			when.declare(fs, "retry")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var id string
			if err := inv.check([]arg{{"ID", &id}}, "tenant"); err != nil {
				return err
			}
			req := client.RetryTaskRequest{ExpectVersion: inv.optUint("expect-version", expectVersion), Status: status}
			var err error
			if req.AvailableAt, req.Delay, err = when.resolve(inv); err != nil {
				return err
			}
			return a.taskCall(ctx, 0, func(ctx context.Context, c *client.Client) (*client.Task, error) {
				t, err := c.RetryTask(ctx, tenant, id, req)
				return t, taskRefusal(err, id, "retry", req.ExpectVersion, nil, nil)
			})
		},
	}
}

func taskCancelCommand() *command {
	var tenant, reason string
	var expectVersion uint64
	var token fencingToken
	return &command{
		name:    "cancel",
		summary: "Cancel a task, or ask the holder of its lease to stop",
		args:    "ID",
		long: `A task without a live lease is cancelled at once (status cancelled) and
its fencing token retired. A leased one gets cancel_requested: it is
cancelled when its holder acknowledges (this command with --fencing-token),
releases or fails it, or its lease runs out; after that no write under the
holder's token succeeds. Needs write access to the task's queue.`,
		examples: `  baton task cancel report-42 --tenant acme --reason "the user stopped the run"
  baton task cancel report-42 --tenant acme --fencing-token 589825
`,
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.StringVar(&reason, "reason", "", "why (kept as last_error)")
			fs.Uint64Var(&expectVersion, "expect-version", 0, "cancel only at this version")
			token.declare(fs, "fencing token of your claim: the holder cancels (acknowledges) at once")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var id string
			if err := inv.check([]arg{{"ID", &id}}, "tenant"); err != nil {
				return err
			}
			tok, err := token.resolve(a, inv, false)
			if err != nil {
				return err
			}
			req := client.CancelTaskRequest{FencingToken: tok, ExpectVersion: inv.optUint("expect-version", expectVersion), Reason: reason}
			return a.taskCall(ctx, 0, func(ctx context.Context, c *client.Client) (*client.Task, error) {
				t, err := c.CancelTask(ctx, tenant, id, req)
				return t, taskRefusal(err, id, "cancellation", req.ExpectVersion, nil, req.FencingToken)
			})
		},
	}
}

func taskDepsCommand() *command {
	var tenant, pageToken string
	var limit int
	var stale bool
	return &command{
		name:     "deps",
		summary:  "List a task's dependencies and the outcome of each resolved one",
		args:     "ID",
		examples: "  baton task deps review-42 --tenant acme\n",
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.IntVar(&limit, "limit", 0, "page size (default: the server's)")
			fs.StringVar(&pageToken, "page-token", "", "continue after a previous page")
			staleFlag(fs, &stale)
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var id string
			if err := inv.check([]arg{{"ID", &id}}, "tenant"); err != nil {
				return err
			}
			return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
				list, err := c.ListTaskDependencies(ctx, tenant, id, limit, pageToken, readOpts(stale)...)
				if err != nil {
					return taskRefusal(err, id, "listing", nil, nil, nil)
				}
				return a.emit(list, func(w io.Writer) {
					fmt.Fprintln(w, "TASK\tSTATUS\tARTIFACT\tRESULT")
					for _, d := range list.Dependencies {
						status := d.Status
						if !d.Resolved {
							status = "(unresolved)"
						}
						fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", d.TaskID, status, d.ArtifactID, d.Result)
					}
					if list.NextPageToken != "" {
						fmt.Fprintf(w, "\nmore: --page-token %s\n", list.NextPageToken)
					}
				})
			})
		},
	}
}

// availabilityFlags are --delay and --at: when a queue claim may take the
// task.
type availabilityFlags struct {
	delay time.Duration
	at    string
}

func (f *availabilityFlags) declare(fs *pflag.FlagSet, what string) {
	fs.DurationVar(&f.delay, "delay", 0, "no queue claim takes the task for this long after the "+what+", e.g. 10m")
	fs.StringVar(&f.at, "at", "", "no queue claim takes the task before this RFC 3339 time")
}

func (f *availabilityFlags) resolve(inv *invocation) (*time.Time, time.Duration, error) {
	if f.delay < 0 {
		return nil, 0, inv.usagef("--delay must not be negative")
	}
	if f.at == "" {
		return nil, f.delay, nil
	}
	if f.delay != 0 {
		return nil, 0, inv.usagef("give --delay or --at, not both")
	}
	at, err := time.Parse(time.RFC3339Nano, f.at)
	if err != nil {
		return nil, 0, inv.usagef("--at %q is not an RFC 3339 time, e.g. 2026-12-01T10:00:00Z", f.at)
	}
	return &at, 0, nil
}

func taskDeleteCommand() *command {
	var tenant string
	var expectVersion uint64
	return &command{
		name:     "delete",
		aliases:  deleteAliases,
		summary:  "Delete a task",
		args:     "ID",
		examples: "  baton task delete report-42 --tenant acme --expect-version 7\n",
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.Uint64Var(&expectVersion, "expect-version", 0, "delete only at this version")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var id string
			if err := inv.check([]arg{{"ID", &id}}, "tenant"); err != nil {
				return err
			}
			ev := inv.optUint("expect-version", expectVersion)
			return a.write(ctx, "deleted task "+id, func(ctx context.Context, c *client.Client, o client.RequestOption) error {
				return taskRefusal(c.DeleteTask(ctx, tenant, id, ev, o), id, "delete", ev, nil, nil)
			})
		},
	}
}

func queueClaimCommand() *command {
	var tenant, setStatus string
	var req client.QueueClaimRequest
	var lease, wait time.Duration
	var statuses stringList
	var max int
	return &command{
		name:    "claim",
		summary: "Lease the best claimable task of a queue (highest priority, then oldest)",
		args:    "QUEUE",
		long: `Prints the claimed task, or "no claimable task" (JSON: null) with exit status 0.
With --max N it claims up to N tasks in one request, each with its own fencing
token and lease, and prints each (JSON: a list, [] when none).`,
		examples: "  baton queue claim research --tenant acme --owner worker-1 --lease 30s --wait 10s\n",
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.StringVar(&req.Owner, "owner", "", "owner of the lease (required)")
			fs.DurationVar(&lease, "lease", 0, "lease duration, e.g. 30s (required)")
			fs.DurationVar(&wait, "wait", 0, "wait up to this long for a claimable task")
			fs.Var(&statuses, "status", "claimable status (repeatable or comma-separated; default pending)")
			fs.StringVar(&setStatus, "set-status", "", "status to set on claim")
			fs.IntVar(&max, "max", 0, "claim up to this many tasks in one request (1 to 64)")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var queue string
			if err := inv.check([]arg{{"QUEUE", &queue}}, "tenant", "owner"); err != nil {
				return err
			}
			var err error
			if req.Lease, err = inv.requiredLease("lease", lease); err != nil {
				return err
			}
			if wait < 0 {
				return inv.usagef("--wait must not be negative")
			}
			req.Wait, req.Statuses = wait, statuses
			req.SetStatus = inv.optString("set-status", setStatus)
			if max != 0 {
				if max < 1 || max > client.MaxClaimBatch {
					return inv.usagef("--max must be between 1 and %d", client.MaxClaimBatch)
				}
				return a.queueClaimBatch(ctx, tenant, queue, req, wait, max)
			}
			return a.queueClaim(ctx, tenant, queue, req, wait)
		},
	}
}

func (a *app) queueClaim(ctx context.Context, tenant, queue string, req client.QueueClaimRequest, wait time.Duration) error {
	c, ctx, cancel, err := a.connect(ctx, wait)
	if err != nil {
		return err
	}
	defer cancel()
	t, err := c.ClaimQueue(ctx, tenant, queue, req)
	if err != nil {
		return err
	}
	return a.emit(t, func(w io.Writer) {
		if t == nil {
			fmt.Fprintf(w, "no claimable task in queue %s\n", queue)
			return
		}
		printTask(w, t)
	})
}

// queueClaimBatch is queue claim --max: up to max tasks in one request.
func (a *app) queueClaimBatch(ctx context.Context, tenant, queue string, req client.QueueClaimRequest, wait time.Duration, max int) error {
	c, ctx, cancel, err := a.connect(ctx, wait)
	if err != nil {
		return err
	}
	defer cancel()
	ts, err := c.ClaimQueueBatch(ctx, tenant, queue, req, max)
	if err != nil {
		return err
	}
	if ts == nil {
		ts = []*client.Task{}
	}
	return a.emit(ts, func(w io.Writer) {
		if len(ts) == 0 {
			fmt.Fprintf(w, "no claimable task in queue %s\n", queue)
			return
		}
		for i, t := range ts {
			if i > 0 {
				fmt.Fprintln(w)
			}
			printTask(w, t)
		}
	})
}

func queuePolicyCommand() *command {
	return &command{
		name:    "policy",
		summary: "A queue's lifecycle defaults for the tasks created in it",
		examples: `  baton queue policy set research --tenant acme --max-attempts 5 --backoff-initial 1s --backoff-max 5m
  baton queue policy get research --tenant acme
`,
		subs: []*command{queuePolicySetCommand(), queuePolicyGetCommand()},
	}
}

func queuePolicySetCommand() *command {
	var tenant string
	var p client.QueuePolicy
	var initial, maxDelay time.Duration
	return &command{
		name:    "set",
		summary: "Set a queue's defaults (cluster admin); tasks created afterwards take them",
		args:    "QUEUE",
		long: "Flags left out are 0: no default for that field. Setting none clears the policy. --retention applies to " +
			"every task of the queue that enters done, dead or cancelled afterwards, unless the task set its own.",
		examples: `  baton queue policy set research --tenant acme --max-attempts 5 --backoff-initial 1s --backoff-max 5m
`,
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.Uint64Var(&p.MaxAttempts, "max-attempts", 0, "default max_attempts (0: none)")
			fs.DurationVar(&initial, "backoff-initial", 0, "default initial backoff (0: none)")
			fs.DurationVar(&maxDelay, "backoff-max", 0, "default backoff cap (0: none)")
			fs.DurationVar(&p.Retention, "retention", 0, "delete the queue's tasks this long after they are done, dead or cancelled (0: keep them)")
			fs.Int64Var(&p.MaxLeased, "max-leased", 0, "at most this many tasks leased at once (0: no limit)")
			fs.Int64Var(&p.ClaimsPerSecond, "claims-per-second", 0, "at most this many claims a second (0: no limit)")
			fs.Int64Var(&p.ClaimBurst, "claim-burst", 0, "claims allowed at once above the rate (default 1)")
			fs.Int64Var(&p.ConcurrencyKeyLimit, "concurrency-key-limit", 0, "at most this many leased tasks per concurrency key (0: no limit)")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var queue string
			if err := inv.check([]arg{{"QUEUE", &queue}}, "tenant"); err != nil {
				return err
			}
			if initial < 0 || maxDelay < 0 || p.Retention < 0 {
				return inv.usagef("--backoff-initial, --backoff-max and --retention must not be negative")
			}
			p.BackoffInitial, p.BackoffMax = initial, maxDelay
			return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
				out, err := c.SetQueuePolicy(ctx, tenant, queue, p)
				if err != nil {
					return err
				}
				return a.emit(out, func(w io.Writer) { printQueuePolicy(w, queue, out) })
			})
		},
	}
}

func queuePolicyGetCommand() *command {
	var tenant string
	var stale bool
	return &command{
		name:     "get",
		summary:  "Show a queue's defaults",
		args:     "QUEUE",
		examples: "  baton queue policy get research --tenant acme\n",
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			staleFlag(fs, &stale)
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var queue string
			if err := inv.check([]arg{{"QUEUE", &queue}}, "tenant"); err != nil {
				return err
			}
			return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
				out, err := c.GetQueuePolicy(ctx, tenant, queue, readOpts(stale)...)
				if err != nil {
					return err
				}
				return a.emit(out, func(w io.Writer) { printQueuePolicy(w, queue, out) })
			})
		},
	}
}

func printQueuePolicy(w io.Writer, queue string, p *client.QueuePolicy) {
	ms := func(v time.Duration) string {
		if v == 0 {
			return "-"
		}
		return v.String()
	}
	attempts := "-"
	if p.MaxAttempts != 0 {
		attempts = fmt.Sprint(p.MaxAttempts)
	}
	fmt.Fprintf(w, "queue:\t%s\nmax attempts:\t%s\nbackoff initial:\t%s\nbackoff max:\t%s\nretention:\t%s\n", queue, attempts,
		ms(p.BackoffInitial), ms(p.BackoffMax), ms(p.Retention))
	if p.MaxLeased != 0 || p.ClaimsPerSecond != 0 || p.ConcurrencyKeyLimit != 0 {
		fmt.Fprintf(w, "max leased:\t%d\nclaims per second:\t%d (burst %d)\nconcurrency key limit:\t%d\n",
			p.MaxLeased, p.ClaimsPerSecond, p.ClaimBurst, p.ConcurrencyKeyLimit)
	}
}

// firstFilledPage is the page get gives for token or, while that page is
// empty but names a next one (the server's walk bound ended it before it
// found anything), the first page after it that holds items or ends the
// list. filled reads a page's item count and next-page token. The list
// commands use it so that a page the server cut short is never shown as
// the end.
func firstFilledPage[P any](token string, get func(token string) (P, error), filled func(P) (int, string)) (P, error) {
	for {
		page, err := get(token)
		if err != nil {
			return page, err
		}
		n, next := filled(page)
		if n > 0 || next == "" {
			return page, nil
		}
		token = next
	}
}

func readOpts(stale bool) []client.RequestOption {
	if stale {
		return []client.RequestOption{client.Stale()}
	}
	return nil
}

// stringList is a repeatable, comma-separated string flag.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }

func (s *stringList) Type() string { return "strings" }

func (s *stringList) Set(v string) error {
	for _, part := range strings.Split(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*s = append(*s, part)
		}
	}
	return nil
}

// taskRefusal words a refused task command: what the flags expected and
// what the task is, and that nothing was done (what is "claim", "update",
// ...).
func taskRefusal(err error, id, what string, expectVersion *uint64, expectStatus *string, token *uint64) error {
	err = reword(err, "version_mismatch", func(e *client.Error) string {
		if v, ok := e.DetailUint("current_version"); ok && expectVersion != nil {
			return fmt.Sprintf("task %q is at version %d, not the expected %d; --expect-version refused the %s", id, v, *expectVersion, what)
		}
		if st, ok := e.DetailString("current_status"); ok && expectStatus != nil {
			return fmt.Sprintf("task %q has status %q, not the expected %q; --expect-status refused the %s", id, st, *expectStatus, what)
		}
		return ""
	})
	err = reword(err, "fenced", func(e *client.Error) string {
		cur, ok := e.DetailUint("current_token")
		if !ok || token == nil {
			return ""
		}
		return fmt.Sprintf("fencing token %d is not current for task %q (the current token is %d: the task was claimed again since); the %s was refused", *token, id, cur, what)
	})
	return reword(err, "lease_held", func(e *client.Error) string {
		owner, _ := e.DetailString("owner")
		until, _ := e.DetailString("lease_until")
		return fmt.Sprintf("task %q is leased by %q until %s; the %s was refused (wait for the lease to end)", id, owner, until, what)
	})
}

// fencingToken is --fencing-token of the task commands that act under a
// claim. Their --token was the fencing token before global flags could
// follow the command; it is now the bearer token, except that a number
// given to --token without --fencing-token is still read as the fencing
// token, with a warning, so that older scripts keep working.
type fencingToken struct {
	value  uint64
	compat string
}

func (f *fencingToken) declare(fs *pflag.FlagSet, usage string) {
	fs.Uint64Var(&f.value, "fencing-token", 0, usage)
	fs.StringVar(&f.compat, "token", "", "bearer token (env BATON_TOKEN); a number here without --fencing-token is read as --fencing-token, as in older releases")
}

// withTaskID reads a command's ID argument (with --tenant required) and
// its required fencing token: what renew, release and fail take.
func (f *fencingToken) withTaskID(a *app, inv *invocation) (id string, token *uint64, err error) {
	if err := inv.check([]arg{{"ID", &id}}, "tenant"); err != nil {
		return "", nil, err
	}
	token, err = f.resolve(a, inv, true)
	return id, token, err
}

// resolve returns the fencing token (nil when not given and not
// required), and takes a --token that is not a fencing token as the
// bearer token.
func (f *fencingToken) resolve(a *app, inv *invocation, required bool) (*uint64, error) {
	given := inv.isSet("fencing-token")
	if inv.isSet("token") {
		if n, err := strconv.ParseUint(f.compat, 10, 64); err == nil && !given {
			fmt.Fprintf(a.stderr, "baton: warning: --token %d is read as --fencing-token %d; --token is the bearer token: use --fencing-token\n", n, n)
			f.value, given = n, true
		} else {
			a.token = f.compat
		}
	}
	if !given {
		if required {
			return nil, inv.usagef("--fencing-token is required")
		}
		return nil, nil
	}
	return &f.value, nil
}
