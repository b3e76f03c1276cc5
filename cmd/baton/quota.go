package main

import (
	"context"
	"fmt"
	"github.com/spf13/pflag"
	"io"

	"github.com/baton-dev/baton/client"
)

func tenantQuotaCommand() *command {
	var maxBytes, maxKeys, burst int64
	var rate float64
	return &command{
		name:    "quota",
		args:    "NAME",
		summary: "Show a tenant's state quota and usage, or set it (admin token)",
		long: `Without flags, shows the quota and usage. To set it, give both --max-bytes
and --max-keys (0: no limit), with --rate and --burst if wanted.`,
		examples: "  baton tenant quota acme                                   # quota and usage\n" +
			"  baton tenant quota acme --max-bytes 1073741824 --max-keys 1000000\n" +
			"  baton tenant quota acme --max-bytes 0 --max-keys 0 --rate 50 --burst 100   # each principal: 50 requests/s per node\n" +
			"  baton tenant quota acme --max-bytes 0 --max-keys 0       # no limit\n",
		flags: func(fs *pflag.FlagSet) {
			fs.Int64Var(&maxBytes, "max-bytes", 0, "bytes of data the tenant may hold (0: no limit)")
			fs.Int64Var(&maxKeys, "max-keys", 0, "keys the tenant may hold (0: no limit)")
			fs.Float64Var(&rate, "rate", 0, "requests per second each principal of the tenant may make to each node (0: no limit)")
			fs.Int64Var(&burst, "burst", 0, "requests a principal may make at once above --rate (default: the rate, rounded up)")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			args, err := inv.positional("NAME")
			if err != nil {
				return err
			}
			set := inv.isSet("max-bytes") || inv.isSet("max-keys") || inv.isSet("rate") || inv.isSet("burst")
			if set && (!inv.isSet("max-bytes") || !inv.isSet("max-keys")) {
				return inv.usagef("give both --max-bytes and --max-keys (0: no limit), with --rate and --burst if wanted")
			}
			c, ctx, cancel, err := a.connect(ctx, 0)
			if err != nil {
				return err
			}
			defer cancel()
			q, err := c.GetTenantQuota(ctx, args[0])
			if set {
				q, err = c.SetTenantQuota(ctx, args[0], client.TenantQuota{MaxBytes: maxBytes, MaxKeys: maxKeys, RatePerSec: rate, Burst: burst})
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
				if q.RatePerSec > 0 {
					fmt.Fprintf(w, "rate:    %g requests/s per principal and node, burst %d\n", q.RatePerSec, q.Burst)
				} else {
					fmt.Fprintf(w, "rate:    no limit\n")
				}
			})
		},
	}
}
