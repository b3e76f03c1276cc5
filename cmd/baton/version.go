package main

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/baton-dev/baton/cmd/internal/buildinfo"
)

func versionCommand() *command {
	return &command{
		name:    "version",
		summary: "Print this CLI's version and the version of the node that answers",
		long: `The server's version is asked of the first node that answers; when none
does, the line says why and the exit status is still 0 (baton --version
prints only the CLI's version and asks nothing).`,
		examples: "  baton version\n  baton version -o json\n",
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if _, err := inv.positional(); err != nil {
				return err
			}
			cli := buildinfo.Get()
			out := map[string]any{"client": cli}
			var health struct {
				NodeID  string `json:"node_id"`
				Version string `json:"version"`
			}
			c, ctx, cancel, err := a.connect(ctx, 0)
			if err == nil {
				defer cancel()
				_, err = c.Do(ctx, http.MethodGet, "/healthz", nil, &health)
			}
			if err == nil {
				out["server"] = map[string]string{"node_id": health.NodeID, "version": health.Version}
			} else {
				out["server_error"] = err.Error()
			}
			return a.emit(out, func(w io.Writer) {
				fmt.Fprintf(w, "client: baton %s\n", cli)
				if err == nil {
					fmt.Fprintf(w, "server: batond %s (node %s)\n", health.Version, health.NodeID)
				} else {
					fmt.Fprintf(w, "server: unknown (%v)\n", err)
				}
			})
		},
	}
}

// buildVersion is the CLI's own version line, without the program name.
func buildVersion() string { return buildinfo.Get().String() }
