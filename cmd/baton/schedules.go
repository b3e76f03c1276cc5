package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/baton-dev/baton/client"
)

func scheduleCommand() *command {
	return &command{
		name:    "schedule",
		summary: "Create tasks on a schedule (cron with a time zone, or an interval)",
		examples: `  baton schedule create nightly-report --tenant acme --queue research --cron "0 2 * * *" --timezone Europe/Paris
  baton schedule pause nightly-report --tenant acme
  baton schedule get nightly-report --tenant acme`,
		subs: []*command{scheduleCreateCommand(), scheduleGetCommand(), scheduleListCommand(), scheduleActCommand("pause"), scheduleActCommand("resume"),
			scheduleActCommand("delete")},
	}
}

func (a *app) scheduleCall(ctx context.Context, call func(context.Context, *client.Client) (*client.Schedule, error)) error {
	return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
		s, err := call(ctx, c)
		if err != nil {
			return err
		}
		if s == nil {
			return nil
		}
		return a.emit(s, func(w io.Writer) {
			spec := s.Cron
			if spec == "" {
				spec = fmt.Sprintf("every %dms", s.IntervalMs)
			} else if s.TimeZone != "" {
				spec += " (" + s.TimeZone + ")"
			}
			fmt.Fprintf(w, "schedule:\t%s\nqueue:\t%s\nwhen:\t%s\ncatch up:\t%s\npaused:\t%v\nnext at:\t%s\nticks:\t%d\n",
				s.ScheduleID, s.Queue, spec, s.CatchUp, s.Paused, timeText(s.NextAt), s.Ticks)
		})
	})
}

func scheduleCreateCommand() *command {
	var tenant string
	var req client.CreateScheduleRequest
	var payload jsonFlag
	return &command{
		name:    "create",
		summary: "Create a schedule",
		args:    "ID",
		long: `Each tick creates one task in --queue with id ID:<tick in Unix ms>, exactly
once, fired by the leader. --catch-up says which ticks missed while the
cluster was down create tasks: latest (default), all, or skip.`,
		examples: `  baton schedule create nightly-report --tenant acme --queue research --cron "0 2 * * *" --timezone Europe/Paris
  baton schedule create heartbeat --tenant acme --queue checks --interval-ms 60000 --catch-up skip
`,
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.StringVar(&req.Queue, "queue", "", "queue of the tasks (required)")
			fs.StringVar(&req.Cron, "cron", "", "cron expression: minute hour day-of-month month day-of-week, or @hourly ...")
			fs.StringVar(&req.TimeZone, "timezone", "", "IANA time zone of --cron (default UTC)")
			fs.Int64Var(&req.IntervalMs, "interval-ms", 0, "a fixed interval instead of --cron")
			fs.StringVar(&req.CatchUp, "catch-up", "", "missed ticks: latest (default), all or skip")
			fs.Int64Var(&req.Priority, "priority", 0, "priority of the tasks")
			fs.Var(&payload, "payload", "payload of the tasks as JSON")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if err := inv.check([]arg{{"ID", &req.ScheduleID}}, "tenant", "queue"); err != nil {
				return err
			}
			req.Payload = payload.raw
			return a.scheduleCall(ctx, func(ctx context.Context, c *client.Client) (*client.Schedule, error) {
				return c.CreateSchedule(ctx, tenant, req)
			})
		},
	}
}

func scheduleGetCommand() *command {
	var tenant string
	return &command{
		name:     "get",
		summary:  "Show a schedule",
		args:     "ID",
		examples: "  baton schedule get nightly-report --tenant acme\n",
		flags:    func(fs *pflag.FlagSet) { tenantFlag(fs, &tenant) },
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var id string
			if err := inv.check([]arg{{"ID", &id}}, "tenant"); err != nil {
				return err
			}
			return a.scheduleCall(ctx, func(ctx context.Context, c *client.Client) (*client.Schedule, error) {
				return c.GetSchedule(ctx, tenant, id)
			})
		},
	}
}

// scheduleActCommand is pause, resume or delete.
func scheduleActCommand(act string) *command {
	var tenant string
	summary := map[string]string{"pause": "Pause a schedule", "resume": "Resume a schedule from its next tick after now",
		"delete": "Delete a schedule (its tasks stay)"}[act]
	var aliases []string
	if act == "delete" {
		aliases = deleteAliases // as every group's delete (docs/cli.md, "Verbs")
	}
	return &command{
		name:     act,
		aliases:  aliases,
		summary:  summary,
		args:     "ID",
		examples: "  baton schedule " + act + " nightly-report --tenant acme\n",
		flags:    func(fs *pflag.FlagSet) { tenantFlag(fs, &tenant) },
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var id string
			if err := inv.check([]arg{{"ID", &id}}, "tenant"); err != nil {
				return err
			}
			return a.scheduleCall(ctx, func(ctx context.Context, c *client.Client) (*client.Schedule, error) {
				switch act {
				case "pause":
					return c.PauseSchedule(ctx, tenant, id)
				case "resume":
					return c.ResumeSchedule(ctx, tenant, id)
				}
				return nil, c.DeleteSchedule(ctx, tenant, id)
			})
		},
	}
}

func scheduleListCommand() *command {
	var tenant, pageToken string
	var limit int
	return &command{
		name:     "list",
		aliases:  listAliases,
		summary:  "List schedules, one page at a time",
		examples: "  baton schedule ls --tenant acme\n",
		flags: func(fs *pflag.FlagSet) {
			tenantFlag(fs, &tenant)
			fs.IntVar(&limit, "limit", 0, "page size (default: the server's)")
			fs.StringVar(&pageToken, "page-token", "", "continue after a previous page")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			if err := inv.check(nil, "tenant"); err != nil {
				return err
			}
			return a.fetch(ctx, 0, func(ctx context.Context, c *client.Client) error {
				list, err := c.ListSchedules(ctx, tenant, limit, pageToken)
				if err != nil {
					return err
				}
				return a.emit(list, func(w io.Writer) {
					fmt.Fprintln(w, "SCHEDULE\tQUEUE\tWHEN\tPAUSED\tNEXT AT\tTICKS")
					for _, s := range list.Schedules {
						when := s.Cron
						if when == "" {
							when = fmt.Sprintf("every %dms", s.IntervalMs)
						}
						fmt.Fprintf(w, "%s\t%s\t%s\t%v\t%s\t%d\n", s.ScheduleID, s.Queue, when, s.Paused, timeText(s.NextAt), s.Ticks)
					}
					if list.NextPageToken != "" {
						fmt.Fprintf(w, "\nmore: --page-token %s\n", list.NextPageToken)
					}
				})
			})
		},
	}
}
