package main

import (
	"context"
	"errors"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/pflag"

	"github.com/baton-dev/baton/cmd/internal/buildinfo"
	"github.com/baton-dev/baton/server/mcpserver"
)

// mcpCommand serves Baton's MCP tools over stdio, for an agent that starts
// it as a local MCP server (docs/mcp.md).
func mcpCommand() *command {
	var tenant, owner string
	return &command{
		name:    "mcp",
		summary: "Serve Baton as MCP tools over stdio (for Claude Code, Cursor, agents)",
		long: `Speaks the Model Context Protocol on stdin/stdout until stdin closes:
the tools of docs/mcp.md (claim_task, publish_artifact, set_ref, ...), in
one tenant, with the token of --token (BATON_TOKEN). The session keeps
the agent's claim and fencing token, renews the lease while it runs, and
releases the claim when it ends. Nothing but MCP is written to stdout.
publish_artifact may read local files here (path).`,
		examples: `  BATON_TENANT=acme BATON_TOKEN=btk_... baton mcp
  baton mcp --tenant acme --owner researcher-1`,
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.StringVar(&owner, "owner", "", "worker name of the session's claims (default mcp- and a random suffix)")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if err := inv.check(nil, "tenant"); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			srv, sess := mcpserver.New(mcpserver.Config{Client: c, Tenant: tenant, Owner: owner, Files: true,
				Version: buildinfo.Get().Version})
			err = srv.Run(ctx, &mcp.StdioTransport{})
			sess.Close()
			// stdin closed (the agent ended the session) or a signal: an
			// ordinary end.
			if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
				return nil
			}
			return err
		},
	}
}
