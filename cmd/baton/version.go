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
		long: `The CLI's own version is printed at once; the server's is asked of the
first node that answers. When no node answers (none accepts a connection
within --dial-timeout, or none answers within --timeout), the server line
says why and the exit status is 6, as for any command that cannot reach
the cluster. baton --version prints only the CLI's version and asks
nothing.`,
		examples: "  baton version\n  baton version -o json\n",
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if _, err := inv.positional(); err != nil {
				return err
			}
			cli := buildinfo.Get()
			if a.output == "table" {
				// At once, before any node is asked.
				fmt.Fprintf(a.stdout, "client: baton %s\n", cli)
			}
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
			if e := a.emit(out, func(w io.Writer) {
				if err == nil {
					fmt.Fprintf(w, "server: batond %s (node %s)\n", health.Version, health.NodeID)
				} else {
					fmt.Fprintf(w, "server: not reachable (%v)\n", err)
				}
			}); e != nil {
				return e
			}
			if err != nil {
				return &reported{err} // the answer above already holds it
			}
			return nil
		},
	}
}

// buildVersion is the CLI's own version line, without the program name.
func buildVersion() string { return buildinfo.Get().String() }
