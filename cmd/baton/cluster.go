package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/baton-dev/baton/client"
)

func statusCommand() *command {
	var at string
	return &command{
		name:    "status",
		summary: "Show the leader, term, indexes, state digest, and whether each member answers and how far it lags",
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
			if at != "" {
				st, err := c.ClusterAt(ctx, a.endpointURL(at))
				if err != nil {
					return err
				}
				return a.emit(st, func(w io.Writer) { printStatus(w, st, nil) })
			}
			st, err := c.Cluster(ctx)
			if err != nil {
				return err
			}
			out := statusView{ClusterStatus: st, Nodes: a.askMembers(ctx, c, st)}
			return a.emit(out, func(w io.Writer) { printStatus(w, st, out.Nodes) })
		},
	}
}

// statusView is baton status's answer: the cluster's status as the
// leader reports it, and what each member says of itself.
type statusView struct {
	*client.ClusterStatus
	Nodes []nodeView `json:"nodes"`
}

// nodeView is one member's own answer to GET /v1/cluster (a stale read of
// that node alone), or why it gave none.
type nodeView struct {
	ID           string `json:"id"`
	Answers      bool   `json:"answers"`
	Error        string `json:"error,omitempty"`
	State        string `json:"state,omitempty"` // its own Raft state
	Term         uint64 `json:"term,omitempty"`
	AppliedIndex uint64 `json:"applied_index,omitempty"`
	// Lag is how many entries of the leader's commit index the member has
	// not applied yet (0 when it is caught up or does not answer).
	Lag uint64 `json:"lag"`
	// Via is the URL the member answered at: one of --endpoints that is
	// this member, else its advertised HTTP address.
	Via string `json:"via,omitempty"`
}

// memberTimeout bounds the wait for one member's answer: a paused or cut
// off node shows as not answering instead of holding the whole status.
const memberTimeout = 3 * time.Second

// own is one node's answer to GET /v1/cluster?consistency=stale at url.
type own struct {
	url string
	st  *client.ClusterStatus
	err error
}

// askMembers asks every member for its own view, all at once, each within
// memberTimeout: through the --endpoints address that answers as that
// member, else through the HTTP address it advertises. The advertised
// address is the one its peers use, which this machine may not resolve or
// reach (a compose project's service name, seen from the Docker host):
// the endpoints are the addresses the user gave for this machine.
func (a *app) askMembers(ctx context.Context, c *client.Client, st *client.ClusterStatus) []nodeView {
	eps, _ := a.endpointURLs() // already parsed once by connect
	ask := func(url string) own {
		ctx, cancel := context.WithTimeout(ctx, memberTimeout)
		defer cancel()
		got, err := c.ClusterAt(ctx, url)
		return own{url: url, st: got, err: err}
	}
	answers := make([]own, len(eps)+len(st.Members))
	var wg sync.WaitGroup
	for i, url := range eps {
		wg.Go(func() { answers[i] = ask(url) })
	}
	for i, m := range st.Members {
		if url := a.endpointURL(m.HTTPAddr); m.HTTPAddr != "" && !slices.Contains(eps, url) {
			wg.Go(func() { answers[len(eps)+i] = ask(url) })
		}
	}
	wg.Wait()

	views := make([]nodeView, len(st.Members))
	for i, m := range st.Members {
		v := &views[i]
		v.ID = m.ID
		ans, found := own{}, false
		for _, e := range answers[:len(eps)] {
			if e.err == nil && e.st.NodeID == m.ID {
				ans, found = e, true
				break
			}
		}
		advertised := a.endpointURL(m.HTTPAddr)
		if !found && m.HTTPAddr != "" {
			ans = answers[len(eps)+i]
			if k := slices.Index(eps, advertised); k >= 0 {
				ans = answers[k] // an endpoint is the advertised address
			}
		}
		switch {
		case found:
		case m.HTTPAddr == "":
			v.Error = "its HTTP address is not known, and no endpoint (--endpoints) answered as " + m.ID
			continue
		case ans.err != nil:
			v.Error = ans.err.Error()
			var dns *net.DNSError
			if errors.As(ans.err, &dns) {
				v.Error = fmt.Sprintf("its advertised address %s does not resolve here (%v), and no endpoint (--endpoints) answered as %s: add one that reaches it",
					m.HTTPAddr, dns, m.ID)
			}
			continue
		case ans.st.NodeID != m.ID:
			v.Error = fmt.Sprintf("its advertised address %s answered as %q", m.HTTPAddr, ans.st.NodeID)
			continue
		}
		v.Answers, v.Via, v.State, v.Term, v.AppliedIndex = true, ans.url, ans.st.State, ans.st.Term, ans.st.AppliedIndex
		if st.CommitIndex > ans.st.AppliedIndex {
			v.Lag = st.CommitIndex - ans.st.AppliedIndex
		}
	}
	return views
}

func printStatus(w io.Writer, st *client.ClusterStatus, nodes []nodeView) {
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
	if nodes == nil {
		printMembers(w, st.Members, st.Leader.ID)
		return
	}
	fmt.Fprintln(w, "ID\tVOTER\tANSWERS\tSTATE\tTERM\tAPPLIED\tLAG\tHTTP ADDR")
	for i, m := range st.Members {
		n := nodes[i]
		if !n.Answers {
			fmt.Fprintf(w, "%s\t%v\tno: %s\t-\t-\t-\t-\t%s\n", m.ID, m.Voter, n.Error, dash(m.HTTPAddr))
			continue
		}
		addr := dash(m.HTTPAddr)
		if hostPort := strings.TrimPrefix(strings.TrimPrefix(n.Via, "https://"), "http://"); n.Via != "" && hostPort != m.HTTPAddr {
			addr += " (via " + n.Via + ")"
		}
		fmt.Fprintf(w, "%s\t%v\tyes\t%s\t%d\t%d\t%d\t%s\n", m.ID, m.Voter, dash(n.State), n.Term, n.AppliedIndex, n.Lag, addr)
	}
}

func membersCommand() *command {
	list := membersListCommand()
	return &command{
		name:     "members",
		aliases:  []string{"member"},
		summary:  "List, add, promote or remove cluster members",
		long:     `"baton members" alone is "baton members list".`,
		examples: "  baton members\n  baton members add --id n4 --raft-addr 10.0.0.4:8001 --http-addr 10.0.0.4:7001\n  baton members remove n4\n",
		run:      list.run,
		subs:     []*command{list, membersAddCommand(), membersRemoveCommand(), membersPromoteCommand()},
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

func membersPromoteCommand() *command {
	return &command{
		name:    "promote",
		args:    "ID",
		summary: "Make a non-voter a voter once it has caught up (refused with exit 6 until then)",
		long: `A node started with --join joins as a non-voter and asks for its own promotion
once it has caught up; this does the same by hand, for a non-voter added with
"baton members add --voter=false".`,
		examples: "  baton members promote n4\n",
		run: func(ctx context.Context, a *app, inv *invocation) error {
			args, err := inv.positional("ID")
			if err != nil {
				return err
			}
			return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
				m, err := c.PromoteMember(ctx, args[0])
				if err != nil {
					return err
				}
				return a.emit(m, func(w io.Writer) { fmt.Fprintf(w, "member %s is a voter\n", m.ID) })
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
