package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/spf13/pflag"
	"io"
	"strings"

	"github.com/baton-dev/baton/client"
)

func tenantCommand() *command {
	return &command{
		name:     "tenant",
		summary:  "Create or list tenants, and set their quotas (admin token)",
		subs:     []*command{tenantCreateCommand(), tenantListCommand(), tenantQuotaCommand()},
		examples: "  baton tenant create acme\n  baton tenant list\n  baton tenant quota acme --max-bytes 1073741824 --max-keys 1000000\n",
	}
}

func tenantCreateCommand() *command {
	return &command{
		name:     "create",
		args:     "NAME",
		summary:  "Create a tenant, or confirm that it exists",
		examples: "  baton tenant create acme\n",
		run: func(ctx context.Context, a *app, inv *invocation) error {
			args, err := inv.positional("NAME")
			if err != nil {
				return err
			}
			c, ctx, cancel, err := a.connect(ctx, 0)
			if err != nil {
				return err
			}
			defer cancel()
			created, err := c.PutTenant(ctx, args[0])
			if err != nil {
				return err
			}
			return a.emit(map[string]any{"tenant": args[0], "created": created}, func(w io.Writer) {
				if created {
					fmt.Fprintf(w, "created tenant %s\n", args[0])
				} else {
					fmt.Fprintf(w, "tenant %s already exists\n", args[0])
				}
			})
		},
	}
}

func tenantListCommand() *command {
	return &command{
		name:     "list",
		aliases:  listAliases,
		summary:  "List all tenants",
		examples: "  baton tenant list\n  baton tenant ls -o json\n",
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if _, err := inv.positional(); err != nil {
				return err
			}
			c, ctx, cancel, err := a.connect(ctx, 0)
			if err != nil {
				return err
			}
			defer cancel()
			tenants, err := c.ListTenants(ctx)
			if err != nil {
				return err
			}
			return a.emit(map[string]any{"tenants": tenants}, func(w io.Writer) {
				for _, t := range tenants {
					fmt.Fprintln(w, t)
				}
			})
		},
	}
}

func principalCommand() *command {
	return &command{
		name:    "principal",
		summary: "Create, list, rotate or delete principals (tokens) of a tenant",
		subs:    []*command{principalCreateCommand(), principalListCommand(), principalRotateCommand(), principalDeleteCommand()},
		examples: "  baton principal create reviewer --tenant acme --grant 'tasks:review/:read,write'\n" +
			"  baton principal list --tenant acme\n  baton principal rotate reviewer --tenant acme\n  baton principal delete reviewer --tenant acme\n",
	}
}

func principalCreateCommand() *command {
	var tenant, name string
	var grants grantList
	return &command{
		name:    "create",
		args:    "NAME",
		summary: "Create a principal with grants and print its token (shown only once)",
		long: `Each --grant is RESOURCE:PREFIX:ACTIONS. RESOURCE is tasks, artifacts,
refs, checkpoints, kv, ops, waitpoints, admin or *; PREFIX may be empty
and may itself contain ':'; ACTIONS are read, write, delete. A PREFIX
ending in '/' covers that name and the names under it ("review/" covers
review and review/a, not review-old); any other PREFIX is a plain string
prefix ("review" covers review-old too), and gets a warning. NAME may
also be given as --name.`,
		examples: `  baton principal create reviewer --tenant acme \
      --grant tasks:review/:read,write --grant artifacts::read
  baton principal create ops --tenant acme --grant '*::read,write,delete'`,
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.StringVar(&name, "name", "", "principal name (instead of NAME)")
			fs.Var(&grants, "grant", "grant RESOURCE:PREFIX:ACTIONS (repeatable)")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if err := inv.nameArg(&name, "name"); err != nil {
				return err
			}
			if err := inv.require("tenant"); err != nil {
				return err
			}
			for _, g := range grants {
				if g.Prefix != "" && !strings.HasSuffix(g.Prefix, "/") {
					fmt.Fprintf(a.stderr, "baton: warning: grant %s:%s is a plain string prefix: it also covers names such as %q; "+
						"end it with '/' (%s:%s/) to cover only %q and the names under %q\n",
						g.Resource, g.Prefix, g.Prefix+"-other", g.Resource, g.Prefix, g.Prefix, g.Prefix+"/")
				}
			}
			return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
				p, err := c.CreatePrincipal(ctx, tenant, name, grants)
				if err != nil {
					return err
				}
				return a.emit(p, func(w io.Writer) { printPrincipal(w, tenant, p) })
			})
		},
	}
}

func printPrincipal(w io.Writer, tenant string, p *client.PrincipalWithToken) {
	printPrincipalToken(w, fmt.Sprintf("Created principal %s in tenant %s.", p.Name, tenant), p)
}

func printPrincipalToken(w io.Writer, headline string, p *client.PrincipalWithToken) {
	fmt.Fprintf(w, "%s\n\n", headline)
	fmt.Fprintf(w, "Token (shown only this once; store it now):\n\n    %s\n\n", p.Token)
	fmt.Fprintln(w, "RESOURCE\tPREFIX\tACTIONS")
	for _, g := range p.Grants {
		fmt.Fprintf(w, "%s\t%s\t%s\n", g.Resource, dash(g.Prefix), strings.Join(g.Actions, ","))
	}
}

func principalListCommand() *command {
	var tenant string
	return &command{
		name:     "list",
		aliases:  listAliases,
		summary:  "List a tenant's principals and their grants (never tokens)",
		examples: "  baton principal list --tenant acme\n",
		flags:    func(fs *pflag.FlagSet) { tenantFlag(fs, &tenant) },
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if _, err := inv.positional(); err != nil {
				return err
			}
			if err := inv.require("tenant"); err != nil {
				return err
			}
			return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
				ps, err := c.ListPrincipals(ctx, tenant)
				if err != nil {
					return err
				}
				return a.emit(map[string]any{"principals": ps}, func(w io.Writer) {
					fmt.Fprintln(w, "PRINCIPAL\tRESOURCE\tPREFIX\tACTIONS")
					for _, p := range ps {
						if len(p.Grants) == 0 {
							fmt.Fprintf(w, "%s\t-\t-\t-\n", p.Name)
						}
						for _, g := range p.Grants {
							fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", p.Name, g.Resource, dash(g.Prefix), strings.Join(g.Actions, ","))
						}
					}
				})
			})
		},
	}
}

func principalRotateCommand() *command {
	var tenant string
	return &command{
		name:    "rotate",
		args:    "NAME",
		summary: "Give a principal a new token (shown only once); the old one fails from then on",
		examples: `  baton principal rotate reviewer --tenant acme
`,
		flags: func(fs *pflag.FlagSet) { tenantFlag(fs, &tenant) },
		run: func(ctx context.Context, a *app, inv *invocation) error {
			args, err := inv.positional("NAME")
			if err != nil {
				return err
			}
			if err := inv.require("tenant"); err != nil {
				return err
			}
			return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
				p, err := c.RotatePrincipal(ctx, tenant, args[0])
				if err != nil {
					return err
				}
				return a.emit(p, func(w io.Writer) {
					printPrincipalToken(w, fmt.Sprintf("Rotated the token of principal %s in tenant %s; the old token no longer works.", p.Name, tenant), p)
				})
			})
		},
	}
}

func principalDeleteCommand() *command {
	var tenant, name string
	return &command{
		name:     "delete",
		aliases:  append([]string{"revoke"}, deleteAliases...),
		args:     "NAME",
		summary:  "Delete (revoke) a principal: its tokens fail from the next request on",
		long:     "NAME may also be given as --name.",
		examples: "  baton principal delete reviewer --tenant acme\n  baton principal revoke --tenant acme --name reviewer\n",
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.StringVar(&name, "name", "", "principal name (instead of NAME)")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if err := inv.nameArg(&name, "name"); err != nil {
				return err
			}
			if err := inv.require("tenant"); err != nil {
				return err
			}
			done := fmt.Sprintf("revoked principal %s in tenant %s", name, tenant)
			return a.write(ctx, done, func(ctx context.Context, c *client.Client, o client.RequestOption) error {
				return c.RevokePrincipal(ctx, tenant, name, o)
			})
		},
	}
}

// grantList is the repeatable --grant flag: RESOURCE:PREFIX:ACTIONS, where
// the prefix is everything between the first and the last colon.
type grantList []client.Grant

func (g *grantList) String() string {
	parts := make([]string, len(*g))
	for i, gr := range *g {
		parts[i] = gr.Resource + ":" + gr.Prefix + ":" + strings.Join(gr.Actions, ",")
	}
	return strings.Join(parts, " ")
}

func (g *grantList) Type() string { return "grant" }

func (g *grantList) Set(s string) error {
	first, last := strings.Index(s, ":"), strings.LastIndex(s, ":")
	if first < 0 || first == last {
		return errors.New("want RESOURCE:PREFIX:ACTIONS, e.g. tasks:review:read,write")
	}
	gr := client.Grant{Resource: s[:first], Prefix: s[first+1 : last]}
	if gr.Resource == "" {
		return errors.New("empty resource")
	}
	for _, act := range strings.Split(s[last+1:], ",") {
		switch act {
		case "read", "write", "delete":
			gr.Actions = append(gr.Actions, act)
		default:
			return fmt.Errorf("unknown action %q (want read, write or delete)", act)
		}
	}
	*g = append(*g, gr)
	return nil
}
