package runner

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/baton-dev/baton/chaos/checker"
	"github.com/baton-dev/baton/chaos/faults"
	"github.com/baton-dev/baton/chaos/history"
)

// LeaseSkew summarises, for acknowledged claims, lease_until minus (the
// client's clock when the claim returned plus lease_ms): about minus the
// latency normally, about the stamping leader's clock offset under skew.
type LeaseSkew struct {
	Normal, Skewed Span
}

// Span is a min/max in milliseconds; N is the number of samples.
type Span struct {
	N        int
	Min, Max int64
}

func (s *Span) add(v int64) {
	if s.N == 0 || v < s.Min {
		s.Min = v
	}
	if s.N == 0 || v > s.Max {
		s.Max = v
	}
	s.N++
}

func (s *Span) merge(o Span) {
	if o.N == 0 {
		return
	}
	s.add(o.Min)
	s.add(o.Max)
	s.N += o.N - 2
}

func (s Span) String() string {
	if s.N == 0 {
		return "no samples"
	}
	return fmt.Sprintf("%+dms .. %+dms (%d claims)", s.Min, s.Max, s.N)
}

func leaseSkew(h *history.History) LeaseSkew {
	var ls LeaseSkew
	for _, op := range history.Flatten(h.Ops) {
		if (op.Kind != history.TaskClaim && op.Kind != history.TaskQueueClaim) || op.Outcome != history.OK || op.Out.LeaseUntil == 0 {
			continue
		}
		dev := op.Out.LeaseUntil - (op.WallMS + op.In.LeaseMS)
		if during(h.Faults, op, string(faults.ClockSkew), skewAfterglow) {
			ls.Skewed.add(dev)
		} else {
			ls.Normal.add(dev)
		}
	}
	return ls
}

// skewAfterglow is how long a clock-skew fault is felt after it is healed:
// the state machine's clock never goes back, so after a leader ran ahead
// it stays ahead until real time catches up (at most the largest skew).
const skewAfterglow = 5 * time.Second

// during reports whether op overlapped a fault of kind ("" for any), or
// followed it within after.
func during(fs []history.Fault, op history.Op, kind string, after time.Duration) bool {
	for _, f := range fs {
		if (kind == "" || f.Kind == kind) && op.Invoke <= f.End+int64(after) && op.Return >= f.Start {
			return true
		}
	}
	return false
}

// save writes a failing (or kept) run's artifacts and removes a passing
// run's directory.
func (r *Result) save(cfg Config) {
	if !r.Failed() && !cfg.Keep {
		os.RemoveAll(r.Dir)
		r.Dir = ""
		return
	}
	write := func(name, text string) {
		_ = os.WriteFile(filepath.Join(r.Dir, name), []byte(text), 0o644)
	}
	write("REPLAY", fmt.Sprintf("seed %d\n%s\n", r.Seed, r.Command))
	var b strings.Builder
	if r.Err != nil {
		fmt.Fprintf(&b, "harness error: %v\n", r.Err)
	}
	for _, a := range r.Anomalies {
		b.WriteString(a.String() + "\n")
		if r.History != nil && len(a.Ops) <= 12 { // longer lists: see the porcupine HTML
			for _, id := range a.Ops {
				for _, op := range r.History.Ops {
					if op.ID == id {
						fmt.Fprintf(&b, "    %s %s\n", op.String(), op.Err)
					}
				}
			}
		}
	}
	for _, p := range r.Inconclusive {
		fmt.Fprintf(&b, "inconclusive: %s\n", p)
	}
	for _, f := range r.Faults {
		fmt.Fprintf(&b, "fault %s [%v..%v] %s %s\n", f.Kind, time.Duration(f.Start), time.Duration(f.End), f.Description, f.Err)
	}
	write("report.txt", b.String())
	if r.History != nil {
		_ = r.History.Save(filepath.Join(r.Dir, "history.json"))
	}
	if r.report != nil && r.report.Linearizability != nil {
		timeout := cfg.CheckTimeout
		if timeout == 0 {
			timeout = time.Minute
		}
		_, _ = r.report.Linearizability.WriteHTML(r.Dir, cfg.Keep && !r.Failed(), timeout)
	}
}

// Summary aggregates runs.
type Summary struct {
	Runs, Failed, HarnessErrors int
	Faults                      map[string]int
	FaultErrors                 int
	Disrupted                   map[string]int // ops unknown while a fault of the kind was active
	Ops                         OpCounts
	Anomalies                   map[string]int
	Inconclusive                int
	LeaseSkew                   LeaseSkew
	Life                        checker.LifeCounts
	Coord                       checker.CoordCounts
	LostResponses               int64
	Elapsed                     time.Duration
	FailedRuns                  []*Result
}

// NewSummary returns an empty summary.
func NewSummary() *Summary {
	return &Summary{Faults: map[string]int{}, Disrupted: map[string]int{}, Anomalies: map[string]int{}}
}

// Add counts one run.
func (s *Summary) Add(r *Result) {
	s.Runs++
	if r.Failed() {
		s.Failed++
		s.FailedRuns = append(s.FailedRuns, r)
	}
	if r.Err != nil {
		s.HarnessErrors++
	}
	for _, f := range r.Faults {
		s.Faults[f.Kind]++
		if f.Err != "" {
			s.FaultErrors++
		}
	}
	if r.History != nil {
		for _, op := range r.History.Ops {
			if op.Outcome != history.Unknown {
				continue
			}
			for _, f := range r.History.Faults {
				if op.Invoke >= f.Start && op.Invoke <= f.End {
					s.Disrupted[f.Kind]++
					break
				}
			}
		}
	}
	s.Ops.Total += r.Ops.Total
	s.Ops.OK += r.Ops.OK
	s.Ops.Fail += r.Ops.Fail
	s.Ops.Unknown += r.Ops.Unknown
	s.Ops.Fenced += r.Ops.Fenced
	for _, a := range r.Anomalies {
		s.Anomalies[a.Checker]++
	}
	s.Inconclusive += len(r.Inconclusive)
	s.LostResponses += r.LostResponses
	s.LeaseSkew.Normal.merge(r.LeaseSkew.Normal)
	s.LeaseSkew.Skewed.merge(r.LeaseSkew.Skewed)
	s.Life.Add(r.Life)
	s.Coord.Add(r.Coord)
	s.Elapsed += r.Duration
}

// TotalFaults is the number of faults injected.
func (s *Summary) TotalFaults() int {
	n := 0
	for _, v := range s.Faults {
		n += v
	}
	return n
}

// TotalAnomalies is the number of anomalies found.
func (s *Summary) TotalAnomalies() int {
	n := 0
	for _, v := range s.Anomalies {
		n += v
	}
	return n + s.HarnessErrors
}

// Line is the closing line: "chaos: N runs, M faults, K ops, A anomalies".
func (s *Summary) Line() string {
	return fmt.Sprintf("chaos: %d runs, %d faults, %d ops, %d anomalies", s.Runs, s.TotalFaults(), s.Ops.Total, s.TotalAnomalies())
}

// Checkers lists every anomaly class of the report, checkers first.
var Checkers = []string{checker.NameLinearizable, checker.NameFencing, checker.NameLostWrite, checker.NameIdempotency,
	checker.NameConvergence, checker.NameLifecycle, checker.NameDependencies, checker.NameCancellation, checker.NameSchedules,
	checker.NameFlowControl, checker.NameWaitpoints, AnomalyCrash, AnomalyAvailability, AnomalyServerError, AnomalyFault}

// Table writes the summary table and the closing line.
func (s *Summary) Table(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(name string, v any, note string) { fmt.Fprintf(tw, "%s\t%v\t %s\n", name, v, note) }
	row("runs", s.Runs, fmt.Sprintf("failed %d, harness errors %d", s.Failed, s.HarnessErrors))
	row("faults", s.TotalFaults(), fmt.Sprintf("injection or heal errors %d", s.FaultErrors))
	for _, k := range faults.AllKinds {
		if n := s.Faults[string(k)]; n > 0 {
			row("  "+string(k), n, fmt.Sprintf("ops with unknown outcome while active: %d", s.Disrupted[string(k)]))
		}
	}
	row("lost responses", s.LostResponses, "client side: writes applied whose answer was dropped, then retried with the same key")
	row("operations", s.Ops.Total, "")
	row("  ok", s.Ops.OK, "")
	row("  failed", s.Ops.Fail, fmt.Sprintf("definitive refusals, of which fenced: %d", s.Ops.Fenced))
	row("  unknown", s.Ops.Unknown, "timed out or unavailable: may or may not have applied")
	row("anomalies", s.TotalAnomalies(), "")
	for _, c := range Checkers {
		row("  "+c, s.Anomalies[c], "")
	}
	var others []string
	for c := range s.Anomalies {
		if !contains(Checkers, c) {
			others = append(others, c)
		}
	}
	sort.Strings(others)
	for _, c := range others {
		row("  "+c, s.Anomalies[c], "")
	}
	if s.HarnessErrors > 0 {
		row("  harness", s.HarnessErrors, "runs that could not run")
	}
	row("inconclusive", s.Inconclusive, "partitions porcupine could not decide in time")
	row("lease end - (client clock + lease)", "", "")
	row("  no clock skew", "", s.LeaseSkew.Normal.String())
	row("  during clock skew (and 5s after)", "", s.LeaseSkew.Skewed.String())
	row("task lifecycle", "", "")
	row("  claims judged", s.Life.Judged, fmt.Sprintf("of %d: the version each claimed was seen; %d queue claims against an available_at", s.Life.Claims, s.Life.Delayed))
	row("  failed attempts", s.Life.Fails, fmt.Sprintf("of which made the task dead: %d; retries: %d", s.Life.Dead, s.Life.Retries))
	row("  expiring versions", s.Life.Expiring, "task versions seen with an expires_at (terminal, with a retention period)")
	row("  purges seen", s.Life.Purged, fmt.Sprintf("tasks found gone, by %d answers (not_found); judged against an expiry: %d", s.Life.Gone, s.Life.GoneJudged))
	row("coordination", "", "")
	row("  dependents claimed", s.Coord.DepClaims, fmt.Sprintf("claims of tasks with dependencies judged; bad creates found absent: %d", s.Coord.BadCreates))
	row("  cancellations seen", s.Coord.Cancelled, fmt.Sprintf("answers showing a task cancelled, its token retired; later writes under an old token refused: %d", s.Coord.StaleFenced))
	row("  schedule ticks", s.Coord.Ticks, fmt.Sprintf("tasks of schedule ticks judged; gaps a pause and resume explained: %d", s.Coord.TickGaps))
	row("  flow-limited claims", s.Coord.LeasedClaims, fmt.Sprintf("acknowledged claims of queues with max_leased; most held at once: %d; claims of a rated queue: %d; claims that took nothing: %d; statistics reads judged: %d",
		s.Coord.MaxHeld, s.Coord.RateClaims, s.Coord.NothingClaimed, s.Coord.StatsJudged))
	row("  waitpoints", s.Coord.WaitCompleted+s.Coord.WaitTimedOut, fmt.Sprintf("resolved at the read-back: completed %d, timed out %d; claims of parked tasks judged: %d",
		s.Coord.WaitCompleted, s.Coord.WaitTimedOut, s.Coord.ParkedClaims))
	row("run time", s.Elapsed.Round(time.Second), fmt.Sprintf("%.1fs per run", s.perRun()))
	tw.Flush()
	for _, r := range s.FailedRuns {
		fmt.Fprintf(w, "FAILED seed %d: %s\n  replay: %s\n", r.Seed, firstProblem(r), r.Command)
		if r.Dir != "" {
			fmt.Fprintf(w, "  saved: %s\n", r.Dir)
		}
	}
	fmt.Fprintln(w, s.Line())
}

func (s *Summary) perRun() float64 {
	if s.Runs == 0 {
		return math.NaN()
	}
	return s.Elapsed.Seconds() / float64(s.Runs)
}

func firstProblem(r *Result) string {
	if r.Err != nil {
		return "harness error: " + r.Err.Error()
	}
	if len(r.Anomalies) > 0 {
		return fmt.Sprintf("%d anomalies, first: %s", len(r.Anomalies), r.Anomalies[0].String())
	}
	return "?"
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
