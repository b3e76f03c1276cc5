package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/spf13/pflag"
	"io"

	"github.com/baton-dev/baton/client"
)

func checkpointCommand() *command {
	return &command{
		name:    "checkpoint",
		summary: "Append, read and list a thread's execution checkpoints",
		long: `A thread id is any UTF-8 without control characters (an e-mail address,
a path with slashes). Each thread has namespaces (LangGraph's checkpoint_ns):
--ns picks one, the default namespace when left out.`,
		examples: `  baton checkpoint put cp-1 --tenant acme --thread chat-7 --data '{"messages":[]}'
  baton checkpoint latest --tenant acme --thread user@example.com --ns 'agent:1|tools'
  baton checkpoint list --tenant acme --thread chat-7 --filter '{"source":"loop"}'`,
		subs: []*command{checkpointPutCommand(), checkpointGetCommand(), checkpointLatestCommand(),
			checkpointListCommand(), checkpointWritesCommand(), checkpointDeleteThreadCommand(),
			checkpointCopyThreadCommand(), checkpointPruneCommand(), checkpointDeleteRunsCommand(),
			checkpointPolicyCommand(), checkpointPoliciesCommand()},
	}
}

// threadFlags are the --tenant and --thread every checkpoint command
// needs, and the --ns of those about one namespace.
type threadFlags struct{ tenant, thread, ns string }

func (f *threadFlags) declare(fs *pflag.FlagSet) {
	tenantFlag(fs, &f.tenant)
	fs.StringVar(&f.thread, "thread", "", "thread id (required)")
}

func (f *threadFlags) declareNS(fs *pflag.FlagSet) {
	f.declare(fs)
	fs.StringVar(&f.ns, "ns", "", "checkpoint namespace (LangGraph's checkpoint_ns; default: the default namespace)")
}

// checkpointCall connects, runs call and prints the checkpoint it returns.
func (a *app) checkpointCall(ctx context.Context, call func(context.Context, *client.Client) (*client.Checkpoint, error)) error {
	return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
		cp, err := call(ctx, c)
		if err != nil {
			return err
		}
		return a.emit(cp, func(w io.Writer) { printCheckpoint(w, cp) })
	})
}

func checkpointPutCommand() *command {
	var th threadFlags
	var req client.PutCheckpointRequest
	var data, metadata jsonFlag
	var fence fenceFlags
	return &command{
		name:    "put",
		summary: "Append a checkpoint to a thread (its parent must be the head)",
		args:    "ID",
		long: `Without --fork, --parent must be the thread's head (none for the first
checkpoint); otherwise the answer is version_mismatch (exit 3), saying which
checkpoint is the head (-o json: current_head). Data over 512 KiB goes through
the chunk store, so a checkpoint may be larger than a request.`,
		examples: `  baton checkpoint put cp-1 --tenant acme --thread chat-7 --data '{"messages":[]}'
  baton checkpoint put cp-2 --tenant acme --thread chat-7 --parent cp-1 --data '{"messages":["hi"]}'
  baton checkpoint put cp-1b --tenant acme --thread chat-7 --parent cp-1 --fork --data '{"messages":["hey"]}'
  baton checkpoint put cp-1 --tenant acme --thread user@example.com --ns 'agent:1' --data '{"messages":[]}'`,
		flags: func(fs *pflag.FlagSet) {
			th.declareNS(fs)
			fs.Var(&data, "data", "checkpoint data as JSON (required)")
			fs.StringVar(&req.ParentID, "parent", "", "parent checkpoint id: the head, or any with --fork")
			fs.BoolVar(&req.Fork, "fork", false, "branch from --parent even if it is not the head")
			fs.Var(&metadata, "metadata", "metadata as JSON")
			fence.declare(fs)
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var id string
			if err := inv.check([]arg{{"ID", &id}}, "tenant", "thread", "data"); err != nil {
				return err
			}
			req.Data, req.Metadata, req.NS = data.raw, metadata.raw, th.ns
			var err error
			if req.Fence, err = fence.fence(inv); err != nil {
				return err
			}
			return a.checkpointCall(ctx, func(ctx context.Context, c *client.Client) (*client.Checkpoint, error) {
				cp, err := c.PutCheckpoint(ctx, th.tenant, th.thread, id, req)
				return cp, checkpointRefusal(fenceRefusal(err, req.Fence, "write"), th.thread, req.ParentID)
			})
		},
	}
}

func checkpointGetCommand() *command {
	var th threadFlags
	var stale bool
	return &command{
		name:     "get",
		summary:  "Show one checkpoint with its pending writes",
		args:     "ID",
		examples: "  baton checkpoint get cp-2 --tenant acme --thread chat-7\n  baton checkpoint get cp-2 --tenant acme --thread chat-7 --ns agent:1\n",
		flags: func(fs *pflag.FlagSet) {
			th.declareNS(fs)
			staleFlag(fs, &stale)
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var id string
			if err := inv.check([]arg{{"ID", &id}}, "tenant", "thread"); err != nil {
				return err
			}
			return a.checkpointCall(ctx, func(ctx context.Context, c *client.Client) (*client.Checkpoint, error) {
				return c.GetCheckpointNS(ctx, th.tenant, th.thread, th.ns, id, readOpts(stale)...)
			})
		},
	}
}

func checkpointLatestCommand() *command {
	var th threadFlags
	var stale bool
	return &command{
		name:     "latest",
		summary:  "Show the thread's head with its pending writes",
		examples: "  baton checkpoint latest --tenant acme --thread chat-7\n",
		flags: func(fs *pflag.FlagSet) {
			th.declareNS(fs)
			staleFlag(fs, &stale)
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if err := inv.check(nil, "tenant", "thread"); err != nil {
				return err
			}
			return a.checkpointCall(ctx, func(ctx context.Context, c *client.Client) (*client.Checkpoint, error) {
				return c.LatestCheckpointNS(ctx, th.tenant, th.thread, th.ns, readOpts(stale)...)
			})
		},
	}
}

func checkpointListCommand() *command {
	var th threadFlags
	var before string
	var limit int
	var stale bool
	var filter jsonFlag
	return &command{
		name:    "list",
		aliases: listAliases,
		summary: "List a thread's checkpoints, newest first",
		examples: `  baton checkpoint list --tenant acme --thread chat-7 --limit 10
  baton checkpoint list --tenant acme --thread chat-7 --before cp-2
  baton checkpoint list --tenant acme --thread chat-7 --ns agent:1 --filter '{"source":"loop","step":3}'
`,
		flags: func(fs *pflag.FlagSet) {
			th.declareNS(fs)
			fs.StringVar(&before, "before", "", "only checkpoints older than this one")
			fs.Var(&filter, "filter", "only checkpoints whose metadata has these members, as a JSON object")
			fs.IntVar(&limit, "limit", 0, "at most this many (default: the server's)")
			staleFlag(fs, &stale)
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if err := inv.check(nil, "tenant", "thread"); err != nil {
				return err
			}
			opts := client.ListCheckpointsOptions{NS: th.ns, Before: before, Limit: limit}
			if filter.raw != nil {
				if err := json.Unmarshal(filter.raw, &opts.Filter); err != nil || opts.Filter == nil {
					return inv.usagef(`--filter must be a JSON object of metadata members, such as '{"source":"loop"}'`)
				}
			}
			return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
				list, err := c.ListCheckpoints(ctx, th.tenant, th.thread, opts, readOpts(stale)...)
				if err != nil {
					return err
				}
				return a.emit(map[string]any{"checkpoints": list}, func(w io.Writer) { printCheckpointTable(w, list) })
			})
		},
	}
}

func checkpointWritesCommand() *command {
	var th threadFlags
	var task, taskPath string
	var writes jsonFlag
	var fence fenceFlags
	return &command{
		name:    "writes",
		summary: "Record the pending writes a task made after a checkpoint",
		args:    "ID",
		long: "Each write is {\"channel\", \"value\", \"idx\"?}, idx defaulting to its position. As LangGraph\n" +
			"keeps them: a write at an index >= 0 already recorded for the task stays as it was, one at\n" +
			"a negative index (error, interrupt, resume) replaces what was there.",
		examples: `  baton checkpoint writes cp-2 --tenant acme --thread chat-7 --task step-3 --writes '[{"channel":"messages","value":"hello"}]'`,
		flags: func(fs *pflag.FlagSet) {
			th.declareNS(fs)
			fs.StringVar(&task, "task", "", "id of the task that made the writes (required)")
			fs.StringVar(&taskPath, "task-path", "", "the task's path in the graph (LangGraph's task_path)")
			fs.Var(&writes, "writes", `the writes as a JSON array of {"channel", "value", "idx"?} (required)`)
			fence.declare(fs)
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var id string
			if err := inv.check([]arg{{"ID", &id}}, "tenant", "thread", "task", "writes"); err != nil {
				return err
			}
			f, err := fence.fence(inv)
			if err != nil {
				return err
			}
			ws, err := parseWrites(inv, writes.raw)
			if err != nil {
				return err
			}
			done := fmt.Sprintf("recorded writes of task %s for checkpoint %s", task, id)
			return a.write(ctx, done, func(ctx context.Context, c *client.Client, o client.RequestOption) error {
				req := client.PutWritesRequest{NS: th.ns, TaskID: task, TaskPath: taskPath, Writes: ws, Fence: f}
				return fenceRefusal(c.PutWrites(ctx, th.tenant, th.thread, id, req, o), f, "write")
			})
		},
	}
}

// parseWrites reads --writes: a JSON array of {"channel", "value", "idx"?}.
func parseWrites(inv *invocation, raw json.RawMessage) ([]client.Write, error) {
	var in []struct {
		Channel string          `json:"channel"`
		Value   json.RawMessage `json:"value"`
		Idx     *int64          `json:"idx"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		why := ""
		var typeErr *json.UnmarshalTypeError
		if !errors.As(err, &typeErr) {
			why = " (" + err.Error() + ")"
		}
		return nil, inv.usagef(`--writes must be a JSON array of {"channel", "value", "idx"?} objects, such as '[{"channel":"messages","value":"hi"}]'%s`, why)
	}
	out := make([]client.Write, len(in))
	for i, w := range in {
		out[i] = client.Write{Channel: w.Channel, Value: w.Value, Idx: w.Idx}
	}
	return out, nil
}

func checkpointDeleteThreadCommand() *command {
	var th threadFlags
	var fence fenceFlags
	return &command{
		name:     "delete-thread",
		summary:  "Delete a thread with all its checkpoints and pending writes, in every namespace",
		examples: "  baton checkpoint delete-thread --tenant acme --thread chat-7\n",
		flags: func(fs *pflag.FlagSet) {
			th.declare(fs)
			fence.declare(fs)
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if err := inv.check(nil, "tenant", "thread"); err != nil {
				return err
			}
			f, err := fence.fence(inv)
			if err != nil {
				return err
			}
			return a.write(ctx, "deleted thread "+th.thread, func(ctx context.Context, c *client.Client, o client.RequestOption) error {
				return fenceRefusal(c.DeleteThread(ctx, th.tenant, th.thread, f, o), f, "delete")
			})
		},
	}
}

func checkpointCopyThreadCommand() *command {
	var th threadFlags
	var to string
	return &command{
		name:     "copy-thread",
		summary:  "Copy a thread, every namespace with its pending writes, to a thread that has none",
		examples: "  baton checkpoint copy-thread --tenant acme --thread chat-7 --to chat-7-replay\n",
		flags: func(fs *pflag.FlagSet) {
			th.declare(fs)
			fs.StringVar(&to, "to", "", "the thread to copy to; it must have no checkpoint (required)")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if err := inv.check(nil, "tenant", "thread", "to"); err != nil {
				return err
			}
			return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
				n, err := c.CopyThread(ctx, th.tenant, th.thread, to, nil)
				if err != nil {
					return err
				}
				return a.emitCount(map[string]any{"source": th.thread, "target": to, "checkpoints": n},
					fmt.Sprintf("copied %d checkpoints of thread %s to %s", n, th.thread, to))
			})
		},
	}
}

func checkpointPruneCommand() *command {
	var tenant string
	var threads []string
	var deleteAll bool
	return &command{
		name:    "prune",
		summary: "Keep only the newest checkpoint of each namespace of threads (or delete them)",
		long: "Each namespace of each thread keeps its newest checkpoint with its pending writes;\n" +
			"with --delete the threads are deleted instead. Threads without checkpoints are passed over.",
		examples: "  baton checkpoint prune --tenant acme --threads chat-7,chat-8\n",
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.StringSliceVar(&threads, "threads", nil, "the threads, comma-separated, 1 to 100 (required)")
			fs.BoolVar(&deleteAll, "delete", false, "delete the threads instead of keeping their newest checkpoints")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if err := inv.check(nil, "tenant", "threads"); err != nil {
				return err
			}
			return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
				n, err := c.PruneThreads(ctx, tenant, threads, !deleteAll)
				if err != nil {
					return err
				}
				return a.emitCount(map[string]any{"deleted": n}, fmt.Sprintf("deleted %d checkpoints", n))
			})
		},
	}
}

func checkpointDeleteRunsCommand() *command {
	var tenant string
	return &command{
		name:     "delete-runs",
		summary:  "Delete the checkpoints of runs (their metadata's run_id), in every thread",
		args:     "RUN_ID...",
		examples: "  baton checkpoint delete-runs --tenant acme 1ef4f797-8335-6428-8001-8a1503f9b875\n",
		flags:    func(fs *pflag.FlagSet) { tenantFlag(fs, &tenant) },
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if err := inv.require("tenant"); err != nil {
				return err
			}
			if len(inv.args) == 0 {
				return inv.usagef("missing RUN_ID")
			}
			return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
				n, err := c.DeleteRuns(ctx, tenant, inv.args)
				if err != nil {
					return err
				}
				return a.emitCount(map[string]any{"deleted": n}, fmt.Sprintf("deleted %d checkpoints", n))
			})
		},
	}
}

func checkpointPolicyCommand() *command {
	var tenant string
	var p client.CheckpointPolicy
	return &command{
		name:    "policy",
		summary: "Bound the checkpoints of the threads under a thread-id prefix",
		long: "--keep-last N keeps each namespace's newest N checkpoints, deleting older ones as\n" +
			"checkpoints are put; --max-age deletes a checkpoint that long after its put, heads\n" +
			"included. Both 0 clear the prefix's policy. The longest matching prefix applies.",
		examples: "  baton checkpoint policy --tenant acme --prefix '' --keep-last 50 --max-age 720h\n",
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.StringVar(&p.Prefix, "prefix", "", `thread-id prefix ("" for every thread)`)
			fs.Uint64Var(&p.KeepLast, "keep-last", 0, "newest checkpoints a namespace keeps (0: no bound)")
			fs.DurationVar(&p.MaxAge, "max-age", 0, "how long after its put a checkpoint is kept (0: no bound)")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if err := inv.check(nil, "tenant"); err != nil {
				return err
			}
			return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
				got, err := c.SetCheckpointPolicy(ctx, tenant, p)
				if err != nil {
					return err
				}
				return a.emitCount(got, fmt.Sprintf("policy of prefix %q: keep last %d, max age %s", got.Prefix, got.KeepLast, got.MaxAge))
			})
		},
	}
}

func checkpointPoliciesCommand() *command {
	var tenant string
	return &command{
		name:     "policies",
		summary:  "List a tenant's checkpoint retention policies",
		examples: "  baton checkpoint policies --tenant acme\n",
		flags:    func(fs *pflag.FlagSet) { tenantFlag(fs, &tenant) },
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if err := inv.check(nil, "tenant"); err != nil {
				return err
			}
			return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
				list, err := c.ListCheckpointPolicies(ctx, tenant)
				if err != nil {
					return err
				}
				return a.emit(list, func(w io.Writer) {
					fmt.Fprintln(w, "PREFIX\tKEEP LAST\tMAX AGE")
					for _, p := range list {
						fmt.Fprintf(w, "%q\t%d\t%s\n", p.Prefix, p.KeepLast, p.MaxAge)
					}
				})
			})
		},
	}
}

// emitCount prints v (-o json or yaml) or the line text.
func (a *app) emitCount(v any, text string) error {
	return a.emit(v, func(w io.Writer) { fmt.Fprintln(w, text) })
}

func printCheckpoint(w io.Writer, cp *client.Checkpoint) {
	rows := [][2]string{
		{"thread", cp.ThreadID}, {"namespace", dash(cp.CheckpointNS)}, {"checkpoint", cp.CheckpointID}, {"parent", dash(cp.ParentID)},
		{"created", timeText(cp.CreatedAt)}, {"metadata", rawText(cp.Metadata)}, {"data", rawText(cp.Data)},
	}
	if cp.ExpiresAt != nil {
		rows = append(rows, [2]string{"expires", timeText(*cp.ExpiresAt)})
	}
	for _, r := range rows {
		fmt.Fprintf(w, "%s:\t%s\n", r[0], r[1])
	}
	if len(cp.PendingWrites) == 0 {
		fmt.Fprintf(w, "pending writes:\t-\n")
		return
	}
	fmt.Fprintf(w, "pending writes:\t\n")
	for _, pw := range cp.PendingWrites {
		fmt.Fprintf(w, "  %s\t%d\t%s\t%s\n", pw.TaskID, pw.Idx, pw.Channel, rawText(pw.Value))
	}
}

func printCheckpointTable(w io.Writer, list []client.Checkpoint) {
	fmt.Fprintln(w, "CHECKPOINT\tPARENT\tCREATED\tMETADATA")
	for _, cp := range list {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", cp.CheckpointID, dash(cp.ParentID), timeText(cp.CreatedAt), rawText(cp.Metadata))
	}
}

// checkpointRefusal words a parent that is not the thread's head.
func checkpointRefusal(err error, thread, parent string) error {
	return reword(err, "version_mismatch", func(e *client.Error) string {
		head, ok := e.DetailString("current_head")
		switch {
		case !ok:
			return ""
		case parent == "":
			return fmt.Sprintf("thread %q already has checkpoints (head %q); a checkpoint without --parent must be the thread's first: give --parent %s", thread, head, head)
		case head == "":
			return fmt.Sprintf("thread %q has no checkpoint yet, so --parent %q is not its head; leave out --parent for the first checkpoint", thread, parent)
		}
		return fmt.Sprintf("--parent %q is not the head of thread %q (the head is %q); give --parent %s, or --fork to branch from %s", parent, thread, head, head, parent)
	})
}
