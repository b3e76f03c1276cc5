package main

import (
	"context"
	"fmt"
	"github.com/spf13/pflag"
	"io"
	"strings"

	"github.com/baton-dev/baton/client"
)

func statusCommand() *command {
	var at string
	return &command{
		name:    "status",
		summary: "Show the leader, term, indexes, state digest and members",
		examples: `  baton status
  baton status --at 127.0.0.1:7002    # that node's own view, stale
  baton status -o yaml`,
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&at, "at", "", "ask only this node (host:port or URL), for its own view (stale read, no failover)")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if _, err := inv.positional(); err != nil {
				return err
			}
			c, ctx, cancel, err := a.connect(ctx, 0)
			if err != nil {
				return err
			}
			defer cancel()
			var st *client.ClusterStatus
			if at != "" {
				st, err = c.ClusterAt(ctx, a.endpointURL(at))
			} else {
				st, err = c.Cluster(ctx)
			}
			if err != nil {
				return err
			}
			return a.emit(st, func(w io.Writer) { printStatus(w, st) })
		},
	}
}

func printStatus(w io.Writer, st *client.ClusterStatus) {
	if st.NodeID != "" {
		fmt.Fprintf(w, "node:\t%s (%s)\n", st.NodeID, dash(st.State))
	}
	leader := "none known"
	if st.Leader.ID != "" {
		leader = fmt.Sprintf("%s (http %s, raft %s)", st.Leader.ID, dash(st.Leader.HTTPAddr), dash(st.Leader.RaftAddr))
	}
	fmt.Fprintf(w, "leader:\t%s\n", leader)
	fmt.Fprintf(w, "term:\t%d\n", st.Term)
	fmt.Fprintf(w, "commit index:\t%d\n", st.CommitIndex)
	fmt.Fprintf(w, "applied index:\t%d\n", st.AppliedIndex)
	fmt.Fprintf(w, "snapshot index:\t%d (restored %d)\n", st.LastSnapshotIndex, st.RestoredSnapshotIndex)
	fmt.Fprintf(w, "state digest:\t%s\n", dash(st.StateDigest))
	fmt.Fprintln(w)
	printMembers(w, st.Members, st.Leader.ID)
}

func membersCommand() *command {
	list := membersListCommand()
	return &command{
		name:     "members",
		aliases:  []string{"member"},
		summary:  "List, add or remove cluster members",
		long:     `"baton members" alone is "baton members list".`,
		examples: "  baton members\n  baton members add --id n4 --raft-addr 10.0.0.4:8001 --http-addr 10.0.0.4:7001\n  baton members remove n4\n",
		run:      list.run,
		subs:     []*command{list, membersAddCommand(), membersRemoveCommand()},
	}
}

func membersListCommand() *command {
	return &command{
		name:     "list",
		aliases:  listAliases,
		summary:  "List the cluster's members with their addresses and Raft state",
		examples: "  baton members list\n  baton members ls -o json\n",
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if _, err := inv.positional(); err != nil {
				return err
			}
			return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
				st, err := c.Cluster(ctx)
				if err != nil {
					return err
				}
				return a.emit(st.Members, func(w io.Writer) { printMembers(w, st.Members, st.Leader.ID) })
			})
		},
	}
}

func membersAddCommand() *command {
	var m client.Member
	return &command{
		name:     "add",
		summary:  "Add a node to the cluster configuration",
		examples: "  baton members add --id n4 --raft-addr 127.0.0.1:8004 --http-addr 127.0.0.1:7004\n",
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&m.ID, "id", "", "node id (required)")
			fs.StringVar(&m.RaftAddr, "raft-addr", "", "Raft address of the node (required)")
			fs.StringVar(&m.HTTPAddr, "http-addr", "", "HTTP address of the node")
			fs.BoolVar(&m.Voter, "voter", true, "add as a voter (false: non-voter)")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if _, err := inv.positional(); err != nil {
				return err
			}
			if err := inv.require("id", "raft-addr"); err != nil {
				return err
			}
			return a.write(ctx, fmt.Sprintf("added member %s", m.ID), func(ctx context.Context, c *client.Client, o client.RequestOption) error {
				return c.AddMember(ctx, m, o)
			})
		},
	}
}

func membersRemoveCommand() *command {
	return &command{
		name:     "remove",
		aliases:  append([]string{"delete"}, deleteAliases...),
		args:     "ID",
		summary:  "Remove a node from the cluster configuration",
		examples: "  baton members remove n3\n",
		run: func(ctx context.Context, a *app, inv *invocation) error {
			args, err := inv.positional("ID")
			if err != nil {
				return err
			}
			return a.write(ctx, "removed member "+args[0], func(ctx context.Context, c *client.Client, o client.RequestOption) error {
				return c.RemoveMember(ctx, args[0], o)
			})
		},
	}
}

func transferCommand() *command {
	var to string
	return &command{
		name:     "transfer-leadership",
		summary:  "Ask the leader to hand leadership to another node",
		examples: "  baton transfer-leadership --to n2\n  baton transfer-leadership          # any suitable node\n",
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&to, "to", "", "target node id (default: let the leader choose)")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if _, err := inv.positional(); err != nil {
				return err
			}
			msg := "leadership transfer requested"
			if to != "" {
				msg += " to " + to
			}
			return a.write(ctx, msg, func(ctx context.Context, c *client.Client, o client.RequestOption) error {
				return c.TransferLeadership(ctx, to, o)
			})
		},
	}
}

// endpointURL is one address as --endpoints reads it (a scheme added when
// there is none).
func (a *app) endpointURL(ep string) string {
	if strings.Contains(ep, "://") {
		return ep
	}
	if a.cacert != "" || a.cert != "" {
		return "https://" + ep
	}
	return "http://" + ep
}
