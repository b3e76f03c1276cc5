package fsm

import "strings"

// Operators' figures about the applied commands: tasks by queue and
// status, commands by kind and outcome, leases found expired. Derived only
// from the commands this replica applied (every replica counts the same
// after the same log), kept in memory, never part of the replicated state:
// a restore recounts the tasks from the queue indexes and starts the
// counters of outcomes anew, as a process restart does.
type stats struct {
	tasks    map[TaskGroup]int64       // tasks by tenant, queue and status
	outcomes map[CommandOutcome]uint64 // commands applied, by kind and result code
	expired  uint64                    // claims that took over an expired lease
	pending  map[TaskGroup]int64       // task deltas of the command being applied
	pendExp  uint64                    // expired leases taken over by it
}

// TaskGroup is a tenant's queue and a status.
type TaskGroup struct{ Tenant, Queue, Status string }

// CommandOutcome is a command kind and its result code ("" for success).
type CommandOutcome struct {
	Kind Kind
	Code string
}

func (s *stats) noteTask(old, t *Task, now int64) {
	if s.pending == nil {
		s.pending = map[TaskGroup]int64{}
	}
	if old != nil {
		s.pending[TaskGroup{old.Tenant, old.Queue, old.Status}]--
		if old.Owner != "" && old.LeaseUntil != 0 && old.LeaseUntil <= now && t != nil && t.FencingToken != old.FencingToken {
			s.pendExp++
		}
	}
	if t != nil {
		s.pending[TaskGroup{t.Tenant, t.Queue, t.Status}]++
	}
}

// settle keeps (commit) or drops the pending deltas of one command, and
// counts its outcome.
func (s *stats) settle(commit bool, kind Kind, code string) {
	if commit {
		if s.tasks == nil {
			s.tasks = map[TaskGroup]int64{}
		}
		for g, d := range s.pending {
			if n := s.tasks[g] + d; n != 0 {
				s.tasks[g] = n
			} else {
				delete(s.tasks, g)
			}
		}
		s.expired += s.pendExp
	}
	clear(s.pending)
	s.pendExp = 0
	if s.outcomes == nil {
		s.outcomes = map[CommandOutcome]uint64{}
	}
	s.outcomes[CommandOutcome{kind, code}]++
}

// recount rebuilds the task counts from the queue indexes of st
// (t/<tenant>/q/<queue>/<status>/...): once per restore.
func (s *stats) recount(st *Store) {
	s.tasks = map[TaskGroup]int64{}
	clear(s.pending)
	s.pendExp = 0
	var tenants []string
	st.Scan(tenantRootPrefix, "", func(k string, _ []byte) bool {
		if name := k[len(tenantRootPrefix):]; !containsSlash(name) {
			tenants = append(tenants, name)
		}
		return true
	})
	for _, tn := range tenants {
		base := "t/" + tn + "/q/"
		st.Scan(base, "", func(k string, _ []byte) bool {
			rest := k[len(base):]
			q, rest, ok1 := strings.Cut(rest, "/")
			status, _, ok2 := strings.Cut(rest, "/")
			if ok1 && ok2 {
				s.tasks[TaskGroup{tn, q, status}]++
			}
			return true
		})
	}
}

// OpStats is a copy of the operators' figures (see stats).
type OpStats struct {
	Tasks         map[TaskGroup]int64
	Outcomes      map[CommandOutcome]uint64
	LeaseExpiries uint64
}

// OpStats returns the task counts and command outcomes as of the last
// applied entry. Its cost is the number of groups, not of tasks.
func (f *FSM) OpStats() OpStats {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := OpStats{Tasks: make(map[TaskGroup]int64, len(f.stats.tasks)),
		Outcomes: make(map[CommandOutcome]uint64, len(f.stats.outcomes)), LeaseExpiries: f.stats.expired}
	for g, n := range f.stats.tasks {
		out.Tasks[g] = n
	}
	for o, n := range f.stats.outcomes {
		out.Outcomes[o] = n
	}
	return out
}
