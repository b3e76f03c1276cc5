package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/baton-dev/baton/client"
)

func refCommand() *command {
	return &command{
		name:    "ref",
		summary: "Move, read and delete refs (named pointers to artifact versions)",
		subs:    []*command{refSetCommand(), refGetCommand(), refListCommand(), refDeleteCommand()},
	}
}

func refSetCommand() *command {
	var tenant, expect string
	var absent bool
	var fence fenceFlags
	return &command{
		name:    "set",
		summary: "Point a ref at an artifact, by compare-and-set",
		usage:   "ref set REF ARTIFACT_ID --tenant T [--expect ID | --expect-absent] [--fence-task ID --fence-token N]",
		examples: `  baton ref set report-42/approved sha256:9f86d0...0a08 --tenant acme --expect-absent
  baton ref set report-42/approved sha256:60303a...3a1b --tenant acme --expect sha256:9f86d0...0a08

Without --expect or --expect-absent the move is unconditional. A ref that
already points at ARTIFACT_ID is left as it is (same revision), so
repeating a move is harmless. A failed expectation exits 1 with
version_mismatch and the ref's current artifact id.
`,
		flags: func(fs *flag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.StringVar(&expect, "expect", "", "move only while the ref points at this artifact id")
			fs.BoolVar(&absent, "expect-absent", false, "move only if the ref does not exist yet")
			fence.declare(fs)
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var ref, id string
			if err := inv.check([]arg{{"REF", &ref}, {"ARTIFACT_ID", &id}}, "tenant"); err != nil {
				return err
			}
			if absent && inv.isSet("expect") {
				return usageErrorf(inv.path, "%s: --expect and --expect-absent exclude each other", inv.path)
			}
			if inv.isSet("expect") && expect == "" {
				return usageErrorf(inv.path, "%s: --expect needs an artifact id (use --expect-absent for none)", inv.path)
			}
			want := inv.optString("expect", expect)
			if absent {
				want = client.ExpectAbsent()
			}
			f, err := fence.fence(inv)
			if err != nil {
				return err
			}
			return a.refCall(ctx, func(ctx context.Context, c *client.Client) (*client.Ref, error) {
				return c.SetRef(ctx, tenant, ref, id, want, f)
			})
		},
	}
}

func refGetCommand() *command {
	var tenant string
	var stale bool
	return &command{
		name:     "get",
		summary:  "Show a ref and the artifact version it points at",
		usage:    "ref get REF --tenant T [--stale]",
		examples: "  baton ref get report-42/approved --tenant acme\n",
		flags: func(fs *flag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.BoolVar(&stale, "stale", false, "read from the answering node's local state")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var ref string
			if err := inv.check([]arg{{"REF", &ref}}, "tenant"); err != nil {
				return err
			}
			return a.refCall(ctx, func(ctx context.Context, c *client.Client) (*client.Ref, error) {
				return c.GetRef(ctx, tenant, ref, readOpts(stale)...)
			})
		},
	}
}

func refListCommand() *command {
	var tenant, prefix string
	var stale bool
	return &command{
		name:     "ls",
		summary:  "List refs in name order",
		usage:    "ref ls --tenant T [--prefix P] [--stale]",
		examples: "  baton ref ls --tenant acme --prefix report-42/\n",
		flags: func(fs *flag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.StringVar(&prefix, "prefix", "", "only refs whose name starts with this")
			fs.BoolVar(&stale, "stale", false, "read from the answering node's local state")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if err := inv.check(nil, "tenant"); err != nil {
				return err
			}
			return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
				refs, err := c.ListRefs(ctx, tenant, prefix, readOpts(stale)...)
				if err != nil {
					return err
				}
				return a.emit(map[string]any{"refs": refs}, func(w io.Writer) { printRefTable(w, refs) })
			})
		},
	}
}

func refDeleteCommand() *command {
	var tenant, expect string
	return &command{
		name:    "delete",
		summary: "Delete a ref",
		usage:   "ref delete REF --tenant T [--expect ID]",
		examples: `  baton ref delete report-42/approved --tenant acme --expect sha256:9f86d0...0a08
`,
		flags: func(fs *flag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.StringVar(&expect, "expect", "", "delete only while the ref points at this artifact id")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var ref string
			if err := inv.check([]arg{{"REF", &ref}}, "tenant"); err != nil {
				return err
			}
			if inv.isSet("expect") && expect == "" {
				return usageErrorf(inv.path, "%s: --expect needs an artifact id", inv.path)
			}
			want := inv.optString("expect", expect)
			return a.write(ctx, "deleted ref "+ref, func(ctx context.Context, c *client.Client, o client.RequestOption) error {
				return c.DeleteRef(ctx, tenant, ref, want, o)
			})
		},
	}
}

// refCall connects, runs call and prints the ref it returns.
func (a *app) refCall(ctx context.Context, call func(context.Context, *client.Client) (*client.Ref, error)) error {
	return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
		r, err := call(ctx, c)
		if err != nil {
			return err
		}
		return a.emit(r, func(w io.Writer) { printRef(w, r) })
	})
}

func printRef(w io.Writer, r *client.Ref) {
	rows := [][2]string{
		{"ref", r.Ref}, {"artifact id", r.ArtifactID}, {"name", r.Name}, {"version", fmt.Sprint(r.Version)},
		{"revision", fmt.Sprint(r.Revision)}, {"updated", timeText(r.UpdatedAt)},
	}
	for _, row := range rows {
		fmt.Fprintf(w, "%s:\t%s\n", row[0], row[1])
	}
}

func printRefTable(w io.Writer, refs []client.Ref) {
	fmt.Fprintln(w, "REF\tARTIFACT ID\tNAME\tVERSION\tREVISION\tUPDATED")
	for _, r := range refs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%s\n", r.Ref, r.ArtifactID, r.Name, r.Version, r.Revision, timeText(r.UpdatedAt))
	}
}
