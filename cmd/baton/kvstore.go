package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/baton-dev/baton/client"
)

// The knowledge store behind LangGraph's BaseStore (docs/api.md
// "Knowledge store (LangGraph)"), read from the command line: what agents
// remember, by namespace.

func kvSearchCommand() *command {
	var tenant, filter string
	var req client.StoreSearchRequest
	var stale bool
	return &command{
		name:    "search",
		summary: "Search the LangGraph store's items under a namespace prefix",
		args:    "[LABEL...]",
		long: `The labels are the namespace prefix, one argument each (none: every item).
--filter is a JSON object: field to value, or to {"$eq"|"$ne"|"$gt"|"$gte"|"$lt"|"$lte": value}.
Most recently updated first.`,
		examples: `  baton kv search users alice --tenant acme
  baton kv search users --tenant acme --filter '{"year": {"$gte": 2026}}' --limit 20`,
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.StringVar(&filter, "filter", "", "a JSON object of field conditions")
			fs.IntVar(&req.Limit, "limit", 0, "items to show (default: the server's, 10)")
			fs.IntVar(&req.Offset, "offset", 0, "items to skip")
			staleFlag(fs, &stale)
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if err := inv.require("tenant"); err != nil {
				return err
			}
			req.Prefix = append([]string{}, inv.args...)
			if filter != "" {
				if err := json.Unmarshal([]byte(filter), &req.Filter); err != nil || req.Filter == nil {
					return inv.usagef("--filter must be a JSON object, got %s", filter)
				}
			}
			return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
				res, err := c.StoreSearch(ctx, tenant, req, readOpts(stale)...)
				if err != nil {
					return err
				}
				return a.emit(res, func(w io.Writer) { printStoreItems(w, res) })
			})
		},
	}
}

func kvNamespacesCommand() *command {
	var tenant string
	var req client.StoreNamespacesRequest
	var stale bool
	return &command{
		name:    "namespaces",
		summary: "List the LangGraph store's namespaces",
		long: `Each --prefix or --suffix is one label, in order; "*" matches any one label.
--max-depth cuts the namespaces to that many labels.`,
		examples: `  baton kv namespaces --tenant acme --prefix users --max-depth 2
  baton kv namespaces --tenant acme --suffix memories`,
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.StringArrayVar(&req.Prefix, "prefix", nil, "a label the namespaces begin with (repeat for several)")
			fs.StringArrayVar(&req.Suffix, "suffix", nil, "a label the namespaces end with (repeat for several)")
			fs.IntVar(&req.MaxDepth, "max-depth", 0, "cut namespaces to this many labels (0: whole)")
			fs.IntVar(&req.Limit, "limit", 0, "namespaces to show (default: the server's, 100)")
			fs.IntVar(&req.Offset, "offset", 0, "namespaces to skip")
			staleFlag(fs, &stale)
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if err := inv.check(nil, "tenant"); err != nil {
				return err
			}
			return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
				res, err := c.ListStoreNamespaces(ctx, tenant, req, readOpts(stale)...)
				if err != nil {
					return err
				}
				return a.emit(res, func(w io.Writer) {
					for _, ns := range res.Namespaces {
						b, _ := json.Marshal(ns)
						fmt.Fprintln(w, string(b))
					}
					if res.Truncated {
						fmt.Fprintln(w, "\n(truncated at the server's --store-scan-max: narrow --prefix)")
					}
				})
			})
		},
	}
}

func printStoreItems(w io.Writer, res *client.StoreSearchResult) {
	fmt.Fprintln(w, "NAMESPACE\tKEY\tUPDATED\tEXPIRES\tVALUE")
	for _, it := range res.Items {
		ns, _ := json.Marshal(it.Namespace)
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", ns, it.Key, timeText(it.UpdatedAt), expiryText(it.ExpiresAt), rawText(it.Value))
	}
	if res.Truncated {
		fmt.Fprintln(w, "\n(truncated at the server's --store-scan-max: narrow the prefix)")
	}
}
