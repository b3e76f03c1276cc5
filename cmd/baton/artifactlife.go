package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/baton-dev/baton/client"
)

// Listing artifact names, deleting versions, keep-last policies.

func artifactListCommand() *command {
	var tenant string
	var f client.ListArtifactsOptions
	var stale bool
	return &command{
		name:     "list",
		aliases:  listAliases,
		summary:  "List artifact names with their newest version, one page at a time",
		examples: "  baton artifact ls --tenant acme --prefix report-\n",
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.StringVar(&f.Prefix, "prefix", "", "only names starting with this")
			fs.IntVar(&f.Limit, "limit", 0, "page size (default: the server's)")
			fs.StringVar(&f.PageToken, "page-token", "", "continue after a previous page")
			staleFlag(fs, &stale)
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if err := inv.check(nil, "tenant"); err != nil {
				return err
			}
			return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
				list, err := firstFilledPage(f.PageToken, func(token string) (*client.ArtifactList, error) {
					page := f
					page.PageToken = token
					return c.ListArtifacts(ctx, tenant, page, readOpts(stale)...)
				}, func(l *client.ArtifactList) (int, string) { return len(l.Artifacts), l.NextPageToken })
				if err != nil {
					return err
				}
				return a.emit(list, func(w io.Writer) { printArtifactList(w, list) })
			})
		},
	}
}

func printArtifactList(w io.Writer, list *client.ArtifactList) {
	fmt.Fprintln(w, "NAME\tLATEST\tVERSIONS")
	for _, s := range list.Artifacts {
		fmt.Fprintf(w, "%s\t%d\t%d\n", s.Name, s.LatestVersion, s.Versions)
	}
	if list.NextPageToken != "" {
		fmt.Fprintf(w, "\nmore: --page-token %s\n", list.NextPageToken)
	}
}

func artifactDeleteCommand() *command {
	var tenant, expect string
	var expectVersion uint64
	return &command{
		name:    "delete",
		aliases: deleteAliases,
		summary: "Delete one version of an artifact (NAME@VERSION) or all of them (NAME)",
		args:    "NAME[@VERSION]",
		long: `A version a ref points at is refused (exit 3, "referenced", naming the
refs): move or delete the refs first. The chunks no version names any more
are collected by the cluster's chunk GC after its grace period.`,
		examples: `  baton artifact rm report-42-draft@3 --tenant acme
  baton artifact rm report-42-draft --tenant acme --expect-version 7`,
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.StringVar(&expect, "expect", "", "NAME@VERSION: delete only while the version has this artifact id")
			fs.Uint64Var(&expectVersion, "expect-version", 0, "NAME: delete only while the newest version is this one")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var spec string
			if err := inv.check([]arg{{"NAME[@VERSION]", &spec}}, "tenant"); err != nil {
				return err
			}
			name, v, hasVersion := strings.Cut(spec, "@")
			if name == "" {
				return inv.usagef("missing NAME before @")
			}
			if err := checkArtifactName(inv, "NAME", name); err != nil {
				return err
			}
			if !hasVersion {
				if inv.isSet("expect") {
					return inv.usagef("--expect goes with NAME@VERSION; a whole artifact takes --expect-version")
				}
				return a.write(ctx, "deleted artifact "+name, func(ctx context.Context, c *client.Client, o client.RequestOption) error {
					return referencedRefusal(c.DeleteArtifact(ctx, tenant, name, inv.optUint("expect-version", expectVersion), o))
				})
			}
			version, err := strconv.ParseUint(v, 10, 64)
			if err != nil || version == 0 {
				return inv.usagef("VERSION %q must be a positive integer", v)
			}
			if inv.isSet("expect-version") {
				return inv.usagef("--expect-version goes with a whole artifact (NAME); a version takes --expect")
			}
			if inv.isSet("expect") && expect == "" {
				return inv.usagef("--expect needs an artifact id")
			}
			return a.write(ctx, fmt.Sprintf("deleted artifact %s version %d", name, version), func(ctx context.Context, c *client.Client, o client.RequestOption) error {
				return referencedRefusal(c.DeleteArtifactVersion(ctx, tenant, name, version, expect, o))
			})
		},
	}
}

// referencedRefusal names the refs that hold a version in the message.
func referencedRefusal(err error) error {
	return reword(err, "referenced", func(e *client.Error) string {
		refs, ok := e.Details["refs"].([]any)
		if !ok || len(refs) == 0 {
			return ""
		}
		names := make([]string, len(refs))
		for i, r := range refs {
			names[i] = fmt.Sprint(r)
		}
		return "refs point at it: " + strings.Join(names, ", ") + "; move or delete them first"
	})
}

func artifactPolicyCommand() *command {
	return &command{
		name:    "policy",
		summary: "Keep only the newest versions of the artifacts under a name prefix",
		subs:    []*command{artifactPolicySetCommand(), artifactPolicyListCommand()},
		examples: `  baton artifact policy set --tenant acme --prefix run- --keep-last 5
  baton artifact policy ls --tenant acme`,
	}
}

func artifactPolicySetCommand() *command {
	var tenant, prefix string
	var keep uint64
	return &command{
		name:    "set",
		summary: "Set (--keep-last 0: clear) the keep-last policy of a name prefix",
		long: `Each time a version of a name under the prefix is published, the versions
older than the newest --keep-last are deleted, except those a ref points at
(the policy of the longest matching prefix applies; at most 64 versions
go per publish). Setting a policy deletes nothing by itself. It takes the
admin token or a grant with artifacts write and delete over the whole
prefix.`,
		examples: "  baton artifact policy set --tenant acme --prefix run- --keep-last 5\n",
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.StringVar(&prefix, "prefix", "", `names starting with this ("" for every name)`)
			fs.Uint64Var(&keep, "keep-last", 0, "versions kept per name (required; 0 clears the policy)")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if err := inv.check(nil, "tenant"); err != nil {
				return err
			}
			if err := inv.requireSet("keep-last"); err != nil {
				return err
			}
			return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
				p, err := c.SetArtifactPolicy(ctx, tenant, client.ArtifactPolicy{Prefix: prefix, KeepLast: keep})
				if err != nil {
					return err
				}
				return a.emit(p, func(w io.Writer) { printPolicies(w, []client.ArtifactPolicy{*p}) })
			})
		},
	}
}

func artifactPolicyListCommand() *command {
	var tenant string
	var stale bool
	return &command{
		name:     "list",
		aliases:  listAliases,
		summary:  "List the keep-last policies in prefix order",
		examples: "  baton artifact policy ls --tenant acme\n",
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			staleFlag(fs, &stale)
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if err := inv.check(nil, "tenant"); err != nil {
				return err
			}
			return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
				list, err := c.ListArtifactPolicies(ctx, tenant, readOpts(stale)...)
				if err != nil {
					return err
				}
				return a.emit(map[string]any{"policies": list}, func(w io.Writer) { printPolicies(w, list) })
			})
		},
	}
}

func printPolicies(w io.Writer, list []client.ArtifactPolicy) {
	fmt.Fprintln(w, "PREFIX\tKEEP LAST")
	for _, p := range list {
		prefix := p.Prefix
		if prefix == "" {
			prefix = `""`
		}
		fmt.Fprintf(w, "%s\t%d\n", prefix, p.KeepLast)
	}
}
