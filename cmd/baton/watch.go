package main

import (
	"context"
	"encoding/json"
	"github.com/spf13/pflag"
	"io"

	"github.com/baton-dev/baton/client"
)

func watchCommand() *command {
	var tenant, afterID string
	var opts client.WatchOptions
	var resources stringList
	return &command{
		name:    "watch",
		summary: "Stream a tenant's committed changes, one JSON event per line, until interrupted",
		long: `Each line is {"id", "index", "resource", "key", "type", "value"} (with
-o yaml, one YAML document per event). Without --from-index the stream
starts at the state the node has applied when it connects. If the node goes
away the stream resumes on another endpoint after the last event printed,
with nothing lost or repeated; --timeout bounds how long reconnecting may
take. Resume a later watch exactly with --after-id set to the last id
printed. Exit status 1 with "compacted" when the history needed to resume
is gone: re-read the state and watch from its index. Ctrl-C ends the
stream with status 0.`,
		examples: `  baton watch --tenant acme
  baton watch --tenant acme --resources kv --prefix research/ --from-index 1042
  baton watch --tenant acme --resources tasks,checkpoints | jq -c 'select(.type == "delete")'`,
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.Var(&resources, "resources", "tasks, refs, artifacts, kv, checkpoints, ops (repeatable or comma-separated; default all)")
			fs.StringVar(&opts.Prefix, "prefix", "", `only keys starting with this (kv keys are "namespace/key")`)
			fs.Uint64Var(&opts.FromIndex, "from-index", 0, "stream the changes after this index")
			fs.StringVar(&afterID, "after-id", "", "stream the changes after this event id")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if err := inv.check(nil, "tenant"); err != nil {
				return err
			}
			if afterID != "" && inv.isSet("from-index") {
				return inv.usagef("give --from-index or --after-id, not both")
			}
			opts.Resources, opts.AfterID = resources, afterID
			return a.watch(ctx, tenant, opts)
		},
	}
}

// watch prints events until ctx ends (Ctrl-C: success) or the watch fails.
func (a *app) watch(ctx context.Context, tenant string, opts client.WatchOptions) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	w := c.Watch(ctx, tenant, opts)
	defer w.Close()
	enc := json.NewEncoder(a.stdout)
	for {
		ev, err := w.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if a.output == "yaml" {
			if _, err := io.WriteString(a.stdout, "---\n"); err != nil {
				return err
			}
			if err := a.encode("yaml", ev); err != nil {
				return err
			}
			continue
		}
		if err := enc.Encode(ev); err != nil {
			return err
		}
	}
}
