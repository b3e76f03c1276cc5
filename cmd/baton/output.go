package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/baton-dev/baton/client"
)

// emit prints v as indented JSON with --output json, as YAML with
// --output yaml, or calls text with a tabwriter otherwise. The output ends
// with a newline in every format.
func (a *app) emit(v any, text func(w io.Writer)) error {
	if a.output != "table" {
		return a.encode(a.output, v)
	}
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	text(tw)
	if err := tw.Flush(); err != nil {
		return err
	}
	if b.Len() > 0 && b.Bytes()[b.Len()-1] != '\n' {
		b.WriteByte('\n')
	}
	_, err := a.stdout.Write(b.Bytes())
	return err
}

// encode prints v as indented JSON or as YAML (the same fields: YAML is
// converted from the JSON encoding).
func (a *app) encode(format string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if format == "yaml" {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
	} else {
		b = append(b, '\n')
	}
	_, err = a.stdout.Write(b)
	return err
}

// emitDone reports a write that returns no object.
func (a *app) emitDone(meta client.Meta, text string) error {
	return a.emit(map[string]any{"ok": true, "index": meta.Index}, func(w io.Writer) {
		fmt.Fprintln(w, text)
	})
}

func printTask(w io.Writer, t *client.Task) {
	rows := [][2]string{
		{"task", t.TaskID}, {"tenant", t.TenantID}, {"queue", t.Queue},
		{"status", t.Status}, {"owner", dash(t.Owner)}, {"lease until", leaseText(t.LeaseUntil)},
		{"fencing token", fmt.Sprint(t.FencingToken)}, {"version", fmt.Sprint(t.Version)},
		{"attempt", fmt.Sprint(t.Attempt)}, {"priority", fmt.Sprint(t.Priority)},
		{"artifact", dash(t.ArtifactID)}, {"payload", rawText(t.Payload)}, {"result", rawText(t.Result)},
		{"created", timeText(t.CreatedAt)}, {"updated", timeText(t.UpdatedAt)},
	}
	if t.MaxAttempts != 0 {
		rows = append(rows, [2]string{"max attempts", fmt.Sprint(t.MaxAttempts)})
	}
	if t.AvailableAt != nil {
		rows = append(rows, [2]string{"available at", timeText(*t.AvailableAt)})
	}
	if t.FailedAt != nil {
		rows = append(rows, [2]string{"failed at", timeText(*t.FailedAt)}, [2]string{"last error", dash(t.LastError)})
	}
	if t.ExpiresAt != nil {
		rows = append(rows, [2]string{"expires at", timeText(*t.ExpiresAt)})
	}
	for _, r := range rows {
		fmt.Fprintf(w, "%s:\t%s\n", r[0], r[1])
	}
}

func printTaskTable(w io.Writer, tasks []client.Task) {
	fmt.Fprintln(w, "TASK\tQUEUE\tSTATUS\tOWNER\tLEASE UNTIL\tTOKEN\tVERSION\tPRIORITY\tATTEMPT")
	for _, t := range tasks {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\n", t.TaskID, t.Queue, t.Status,
			dash(t.Owner), leaseText(t.LeaseUntil), t.FencingToken, t.Version, t.Priority, t.Attempt)
	}
}

func printMembers(w io.Writer, members []client.Member, leader string) {
	fmt.Fprintln(w, "ID\tVOTER\tSTATE\tHTTP ADDR\tRAFT ADDR")
	for _, m := range members {
		state := m.State
		if state == "" && m.ID == leader {
			state = "Leader"
		}
		fmt.Fprintf(w, "%s\t%v\t%s\t%s\t%s\n", m.ID, m.Voter, dash(state), dash(m.HTTPAddr), m.RaftAddr)
	}
}

func leaseText(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	switch left := time.Until(*t).Round(time.Second); {
	case left <= 0:
		return timeText(*t) + " (expired)"
	case left < 24*time.Hour:
		return fmt.Sprintf("%s (in %s)", timeText(*t), left)
	}
	return timeText(*t)
}

func timeText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// rawText shows a JSON value on one line.
func rawText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "-"
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
