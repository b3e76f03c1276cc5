package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/baton-dev/baton/client"
)

func queueStatsCommand() *command {
	var tenant string
	var stale bool
	return &command{
		name:     "stats",
		summary:  "Show a queue's statistics: tasks by status, waiting, due later, oldest pending, claims per minute",
		args:     "QUEUE",
		long:     "Figures are as of the time of the newest command the cluster applied (as of), not this machine's clock.",
		examples: "  baton queue stats research --tenant acme\n  baton queue stats research --tenant acme -o json\n",
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			staleFlag(fs, &stale)
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var queue string
			if err := inv.check([]arg{{"QUEUE", &queue}}, "tenant"); err != nil {
				return err
			}
			return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
				st, err := c.GetQueueStats(ctx, tenant, queue, readOpts(stale)...)
				if err != nil {
					return err
				}
				return a.emit(st, func(w io.Writer) { printQueueStats(w, st) })
			})
		},
	}
}

func queueListCommand() *command {
	var tenant string
	var o client.ListQueuesOptions
	var stale bool
	return &command{
		name:     "list",
		aliases:  listAliases,
		summary:  "List the queues that hold tasks, with their counts, one page at a time",
		examples: "  baton queue ls --tenant acme\n  baton queue list --tenant acme --limit 20\n",
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.IntVar(&o.Limit, "limit", 0, "page size (default: the server's)")
			fs.StringVar(&o.PageToken, "page-token", "", "continue after a previous page")
			staleFlag(fs, &stale)
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if err := inv.check(nil, "tenant"); err != nil {
				return err
			}
			return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
				list, err := firstFilledPage(o.PageToken, func(token string) (*client.QueueList, error) {
					page := o
					page.PageToken = token
					return c.ListQueues(ctx, tenant, page, readOpts(stale)...)
				}, func(l *client.QueueList) (int, string) { return len(l.Queues), l.NextPageToken })
				if err != nil {
					return err
				}
				return a.emit(list, func(w io.Writer) { printQueueList(w, list) })
			})
		},
	}
}

func printQueueStats(w io.Writer, st *client.QueueStats) {
	oldest := "-"
	if st.OldestPendingAt != nil {
		oldest = fmt.Sprintf("%s (%s old)", timeText(*st.OldestPendingAt), st.OldestPendingAge().Round(time.Millisecond))
	}
	fmt.Fprintf(w, "queue:\t%s\ntasks:\t%d\nby status:\t%s\nwaiting:\t%d\ndue later:\t%d\nrunning:\t%d (%d more whose lease ran out)\ndead:\t%d\noldest pending:\t%s\nclaims per minute:\t%d\nas of:\t%s\n",
		st.Queue, st.Tasks, statusCounts(st.ByStatus), st.Waiting, st.DueLater, st.Running, st.LeaseExpired, st.Dead, oldest,
		st.ClaimsPerMinute, timeText(st.AsOf))
}

func printQueueList(w io.Writer, list *client.QueueList) {
	fmt.Fprintln(w, "QUEUE\tTASKS\tWAITING\tDUE LATER\tDEAD\tCLAIMS/MIN\tRUNNING\tBY STATUS")
	for _, q := range list.Queues {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", q.Queue, q.Tasks, q.Waiting, q.DueLater, q.Dead, q.ClaimsPerMinute, q.Running,
			statusCounts(q.ByStatus))
	}
	if list.NextPageToken != "" {
		fmt.Fprintf(w, "\nmore: --page-token %s\n", list.NextPageToken)
	}
}

// statusCounts renders counts by status in status order: "done=3 pending=2".
func statusCounts(m map[string]int64) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}
