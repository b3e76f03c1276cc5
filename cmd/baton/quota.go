package main

import (
	"context"
	"flag"
	"fmt"
	"io"
)

func tenantQuotaCommand() *command {
	var maxBytes, maxKeys int64
	return &command{
		name:    "quota",
		summary: "Show a tenant's state quota and usage, or set it (admin token)",
		usage:   "tenant quota NAME [--max-bytes N --max-keys N]",
		examples: "  baton tenant quota acme                                   # quota and usage\n" +
			"  baton tenant quota acme --max-bytes 1073741824 --max-keys 1000000\n" +
			"  baton tenant quota acme --max-bytes 0 --max-keys 0       # no limit\n",
		flags: func(fs *flag.FlagSet) {
			fs.Int64Var(&maxBytes, "max-bytes", 0, "bytes of data the tenant may hold (0: no limit)")
			fs.Int64Var(&maxKeys, "max-keys", 0, "keys the tenant may hold (0: no limit)")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			args, err := inv.positional("NAME")
			if err != nil {
				return err
			}
			set := inv.isSet("max-bytes") || inv.isSet("max-keys")
			if set && !(inv.isSet("max-bytes") && inv.isSet("max-keys")) {
				return usageErrorf("tenant quota", "give both --max-bytes and --max-keys (0: no limit)")
			}
			c, ctx, cancel, err := a.connect(ctx, 0)
			if err != nil {
				return err
			}
			defer cancel()
			q, err := c.GetTenantQuota(ctx, args[0])
			if set {
				q, err = c.SetTenantQuota(ctx, args[0], maxBytes, maxKeys)
			}
			if err != nil {
				return err
			}
			limit := func(v int64) string {
				if v == 0 {
					return "no limit"
				}
				return fmt.Sprint(v)
			}
			return a.emit(q, func(w io.Writer) {
				fmt.Fprintf(w, "tenant:  %s\nbytes:   %d of %s\nkeys:    %d of %s\n", q.Tenant, q.UsedBytes, limit(q.MaxBytes), q.UsedKeys, limit(q.MaxKeys))
			})
		},
	}
}
