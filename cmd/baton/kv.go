package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/spf13/pflag"
	"io"
	"time"

	"github.com/baton-dev/baton/client"
)

func kvCommand() *command {
	return &command{
		name:    "kv",
		summary: "Read and write the knowledge store (namespaced keys with JSON values)",
		examples: `  baton kv put research sources/raft '{"url":"https://raft.github.io"}' --tenant acme
  baton kv get research sources/raft --tenant acme
  baton kv list research --tenant acme --prefix sources/
  baton kv delete research sources/raft --tenant acme`,
		subs: []*command{kvGetCommand(), kvPutCommand(), kvDeleteCommand(), kvListCommand(), kvSearchCommand(), kvNamespacesCommand()},
	}
}

// fenceFlags are --fence-task and --fence-token: a write guarded by a
// task's fencing token. Both or neither.
type fenceFlags struct {
	task  string
	token uint64
}

func (f *fenceFlags) declare(fs *pflag.FlagSet) {
	fs.StringVar(&f.task, "fence-task", "", "apply only while --fence-token is this task's current fencing token")
	fs.Uint64Var(&f.token, "fence-token", 0, "fencing token for --fence-task")
}

// fenceRefusal words a refused fence: the task whose token was given and
// its current token.
func fenceRefusal(err error, f *client.Fence, what string) error {
	if f == nil {
		return err
	}
	return reword(err, "fenced", func(e *client.Error) string {
		if cur, ok := e.DetailUint("current_token"); ok && cur != 0 {
			return fmt.Sprintf("--fence-token %d is not the current token of task %q (%d: the task was claimed again since); the %s was refused", f.Token, f.TaskID, cur, what)
		}
		return ""
	})
}

func (f *fenceFlags) fence(inv *invocation) (*client.Fence, error) {
	hasTask, hasToken := inv.isSet("fence-task"), inv.isSet("fence-token")
	switch {
	case !hasTask && !hasToken:
		return nil, nil
	case !hasTask || !hasToken || f.task == "":
		return nil, inv.usagef("--fence-task and --fence-token go together")
	}
	return &client.Fence{TaskID: f.task, Token: f.token}, nil
}

// kvEntryCall connects, runs call and prints the entry it returns.
func (a *app) kvEntryCall(ctx context.Context, call func(context.Context, *client.Client) (*client.KVEntry, error)) error {
	return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
		e, err := call(ctx, c)
		if err != nil {
			return err
		}
		return a.emit(e, func(w io.Writer) { printKVEntry(w, e) })
	})
}

func kvGetCommand() *command {
	var tenant string
	var stale bool
	return &command{
		name:     "get",
		summary:  "Show one entry",
		args:     "NAMESPACE KEY",
		examples: "  baton kv get research sources/raft --tenant acme\n",
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			staleFlag(fs, &stale)
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var ns, key string
			if err := inv.check([]arg{{"NAMESPACE", &ns}, {"KEY", &key}}, "tenant"); err != nil {
				return err
			}
			return a.kvEntryCall(ctx, func(ctx context.Context, c *client.Client) (*client.KVEntry, error) {
				return c.GetKV(ctx, tenant, ns, key, readOpts(stale)...)
			})
		},
	}
}

func kvPutCommand() *command {
	var tenant string
	var expectVersion uint64
	var ttl time.Duration
	var fence fenceFlags
	return &command{
		name:    "put",
		summary: "Write an entry",
		args:    "NAMESPACE KEY VALUE_JSON",
		long: `--expect-version 0 means "only if absent". Put "--" before a value that
starts with "-": baton kv put ns k --tenant acme -- -5`,
		examples: `  baton kv put research sources/raft '{"url":"https://raft.github.io"}' --tenant acme
  baton kv put research lock '"worker-1"' --tenant acme --expect-version 0 --ttl 30s
  baton kv put research notes/42 '{"ok":true}' --tenant acme --fence-task report-42 --fence-token 589825`,
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.Uint64Var(&expectVersion, "expect-version", 0, "write only if the entry is at this version (0: absent)")
			fs.DurationVar(&ttl, "ttl", 0, "expire the entry this long after the write, e.g. 30s")
			fence.declare(fs)
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var ns, key, value string
			if err := inv.check([]arg{{"NAMESPACE", &ns}, {"KEY", &key}, {"VALUE_JSON", &value}}, "tenant"); err != nil {
				return err
			}
			req, err := kvPutRequest(inv, value, expectVersion, ttl)
			if err != nil {
				return err
			}
			if req.Fence, err = fence.fence(inv); err != nil {
				return err
			}
			return a.kvEntryCall(ctx, func(ctx context.Context, c *client.Client) (*client.KVEntry, error) {
				e, err := c.PutKV(ctx, tenant, ns, key, req)
				return e, kvRefusal(fenceRefusal(err, req.Fence, "write"), ns, key, "write", req.ExpectVersion)
			})
		},
	}
}

func kvPutRequest(inv *invocation, value string, expectVersion uint64, ttl time.Duration) (client.PutKVRequest, error) {
	req := client.PutKVRequest{ExpectVersion: inv.optUint("expect-version", expectVersion)}
	if !json.Valid([]byte(value)) {
		return req, inv.usagef("VALUE_JSON is not valid JSON: %s (quote strings: '\"text\"')", value)
	}
	req.Value = json.RawMessage(value)
	if inv.isSet("ttl") {
		if ttl < time.Millisecond {
			return req, inv.usagef("--ttl must be at least 1ms, got %v", ttl)
		}
		req.TTL = ttl
	}
	return req, nil
}

func kvDeleteCommand() *command {
	var tenant string
	var expectVersion uint64
	return &command{
		name:     "delete",
		aliases:  deleteAliases,
		summary:  "Delete an entry",
		args:     "NAMESPACE KEY",
		examples: "  baton kv del research lock --tenant acme --expect-version 589825\n",
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.Uint64Var(&expectVersion, "expect-version", 0, "delete only at this version")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var ns, key string
			if err := inv.check([]arg{{"NAMESPACE", &ns}, {"KEY", &key}}, "tenant"); err != nil {
				return err
			}
			ev := inv.optUint("expect-version", expectVersion)
			return a.write(ctx, "deleted "+ns+"/"+key, func(ctx context.Context, c *client.Client, o client.RequestOption) error {
				return kvRefusal(c.DeleteKV(ctx, tenant, ns, key, ev, o), ns, key, "delete", ev)
			})
		},
	}
}

func kvListCommand() *command {
	var tenant string
	var f client.ListKVOptions
	var stale bool
	return &command{
		name:     "list",
		aliases:  listAliases,
		summary:  "List the entries of a namespace, one page at a time",
		args:     "NAMESPACE",
		examples: "  baton kv ls research --tenant acme --prefix sources/ --limit 50\n",
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.StringVar(&f.Prefix, "prefix", "", "only keys starting with this")
			fs.IntVar(&f.Limit, "limit", 0, "page size (default: the server's)")
			fs.StringVar(&f.PageToken, "page-token", "", "continue after a previous page")
			staleFlag(fs, &stale)
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var ns string
			if err := inv.check([]arg{{"NAMESPACE", &ns}}, "tenant"); err != nil {
				return err
			}
			return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
				list, err := firstFilledPage(f.PageToken, func(token string) (*client.KVList, error) {
					page := f
					page.PageToken = token
					return c.ListKV(ctx, tenant, ns, page, readOpts(stale)...)
				}, func(l *client.KVList) (int, string) { return len(l.Entries), l.NextPageToken })
				if err != nil {
					return err
				}
				return a.emit(list, func(w io.Writer) { printKVList(w, list) })
			})
		},
	}
}

func printKVEntry(w io.Writer, e *client.KVEntry) {
	rows := [][2]string{
		{"namespace", e.Namespace}, {"key", e.Key}, {"value", rawText(e.Value)},
		{"version", fmt.Sprint(e.Version)}, {"updated", timeText(e.UpdatedAt)}, {"expires", expiryText(e.ExpiresAt)},
	}
	for _, r := range rows {
		fmt.Fprintf(w, "%s:\t%s\n", r[0], r[1])
	}
}

func printKVList(w io.Writer, list *client.KVList) {
	fmt.Fprintln(w, "KEY\tVERSION\tEXPIRES\tVALUE")
	for _, e := range list.Entries {
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", e.Key, e.Version, expiryText(e.ExpiresAt), rawText(e.Value))
	}
	if list.NextPageToken != "" {
		fmt.Fprintf(w, "\nmore: --page-token %s\n", list.NextPageToken)
	}
}

func expiryText(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return leaseText(t)
}

// kvRefusal words a refused --expect-version: the entry's version, or
// that it exists or does not.
func kvRefusal(err error, ns, key, what string, expect *uint64) error {
	if expect == nil {
		return err
	}
	return reword(err, "version_mismatch", func(e *client.Error) string {
		cur, ok := e.DetailUint("current_version")
		switch {
		case !ok:
			return ""
		case *expect == 0:
			return fmt.Sprintf("entry %s/%s exists (version %d); --expect-version 0 (only if absent) refused the %s", ns, key, cur, what)
		case cur == 0:
			return fmt.Sprintf("entry %s/%s does not exist (expected version %d); --expect-version refused the %s", ns, key, *expect, what)
		}
		return fmt.Sprintf("entry %s/%s is at version %d, not the expected %d; --expect-version refused the %s", ns, key, cur, *expect, what)
	})
}
