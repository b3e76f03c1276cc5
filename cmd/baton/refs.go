package main

import (
	"context"
	"fmt"
	"github.com/spf13/pflag"
	"io"

	"github.com/baton-dev/baton/client"
)

func refCommand() *command {
	return &command{
		name:    "ref",
		summary: "Move, read and delete refs (named pointers to artifact versions)",
		subs:    []*command{refPutCommand(), refGetCommand(), refListCommand(), refDeleteCommand()},
		examples: `  baton ref put report-42/approved sha256:9f86d0...0a08 --tenant acme --expect-absent
  baton ref get report-42/approved --tenant acme
  baton ref list --tenant acme --prefix report-42/`,
	}
}

func refPutCommand() *command {
	var tenant, expect string
	var absent bool
	var fence fenceFlags
	return &command{
		name:    "put",
		aliases: []string{"set"},
		summary: "Point a ref at an artifact, by compare-and-set",
		args:    "REF ARTIFACT_ID",
		long: `Without --expect or --expect-absent the move is unconditional. A ref that
already points at ARTIFACT_ID is left as it is (same revision), so
repeating a move is harmless. A failed expectation exits 3 with
version_mismatch, saying where the ref points (-o json: its artifact_id).
"ref set" is the same command.`,
		examples: `  baton ref put report-42/approved sha256:9f86d0...0a08 --tenant acme --expect-absent
  baton ref put report-42/approved sha256:60303a...3a1b --tenant acme --expect sha256:9f86d0...0a08`,
		flags: func(fs *pflag.FlagSet) {
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
				return inv.usagef("--expect and --expect-absent exclude each other")
			}
			if inv.isSet("expect") && expect == "" {
				return inv.usagef("--expect needs an artifact id (use --expect-absent for none)")
			}
			want := inv.optString("expect", expect)
			if absent {
				want = new(string) // "": must be absent, as refRefusal reads it
			}
			f, err := fence.fence(inv)
			if err != nil {
				return err
			}
			req := client.SetRefRequest{ArtifactID: id, ExpectAbsent: absent, Expect: expect, Fence: f}
			return a.refCall(ctx, func(ctx context.Context, c *client.Client) (*client.Ref, error) {
				r, err := c.SetRef(ctx, tenant, ref, req)
				return r, refRefusal(fenceRefusal(err, f, "move"), ref, want, "move")
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
		args:     "REF",
		examples: "  baton ref get report-42/approved --tenant acme\n",
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			staleFlag(fs, &stale)
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
		name:     "list",
		aliases:  listAliases,
		summary:  "List refs in name order",
		examples: "  baton ref ls --tenant acme --prefix report-42/\n",
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.StringVar(&prefix, "prefix", "", "only refs whose name starts with this")
			staleFlag(fs, &stale)
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
		aliases: deleteAliases,
		summary: "Delete a ref",
		args:    "REF",
		examples: `  baton ref delete report-42/approved --tenant acme --expect sha256:9f86d0...0a08
`,
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.StringVar(&expect, "expect", "", "delete only while the ref points at this artifact id")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var ref string
			if err := inv.check([]arg{{"REF", &ref}}, "tenant"); err != nil {
				return err
			}
			if inv.isSet("expect") && expect == "" {
				return inv.usagef("--expect needs an artifact id")
			}
			want := inv.optString("expect", expect)
			return a.write(ctx, "deleted ref "+ref, func(ctx context.Context, c *client.Client, o client.RequestOption) error {
				return refRefusal(c.DeleteRef(ctx, tenant, ref, expect, o), ref, want, "delete")
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

// refRefusal words a refused --expect or --expect-absent: where the ref
// points, or that it does not exist.
func refRefusal(err error, ref string, expect *string, what string) error {
	if expect == nil {
		return err
	}
	return reword(err, "version_mismatch", func(e *client.Error) string {
		cur, ok := e.DetailString("artifact_id")
		switch {
		case !ok:
			return ""
		case *expect == "":
			return fmt.Sprintf("ref %q exists (points to %s); --expect-absent refused the %s", ref, cur, what)
		case cur == "":
			return fmt.Sprintf("ref %q does not exist (expected it to point to %s); --expect refused the %s", ref, *expect, what)
		}
		return fmt.Sprintf("ref %q points to %s, not the expected %s; --expect refused the %s", ref, cur, *expect, what)
	})
}
