package server

import (
	"encoding/base64"
	"net/http"
	"strconv"

	"github.com/baton-dev/baton/fsm"
)

// queueStatsJSON is a queue's figures (docs/api.md "Queues"), as of the
// time of the newest command applied (as_of): every figure, ages
// included, comes from command times, never from this node's clock.
type queueStatsJSON struct {
	Queue    string           `json:"queue"`
	Tasks    int64            `json:"tasks"`
	ByStatus map[string]int64 `json:"by_status"`
	Waiting  int64            `json:"waiting"`
	DueLater int64            `json:"due_later"`
	Dead     int64            `json:"dead"`
	// Leased tasks: live leases (running) and leases that ran out.
	Running      int64 `json:"running"`
	LeaseExpired int64 `json:"lease_expired"`
	// Tasks without a lease that wait on dependencies (not waiting).
	Blocked int64 `json:"blocked"`
	// The oldest claimable waiting task: when it became claimable, and
	// how long before as_of that was (null and 0 when there is none).
	OldestPendingAt    *string `json:"oldest_pending_at"`
	OldestPendingAgeMs int64   `json:"oldest_pending_age_ms"`
	ClaimsPerMinute    int64   `json:"claims_per_minute"`
	AsOf               string  `json:"as_of"`
}

func queueStatsWire(st fsm.QueueStats) queueStatsJSON {
	w := queueStatsJSON{Queue: st.Queue, Tasks: st.Tasks, ByStatus: st.ByStatus, Waiting: st.Waiting, DueLater: st.DueLater,
		Dead: st.ByStatus[fsm.StatusDead], Running: st.Running, LeaseExpired: st.LeaseExpired, Blocked: st.Blocked, ClaimsPerMinute: st.ClaimsLastMinute, AsOf: fsm.FormatMillis(st.AsOf)}
	if st.OldestWaitingSince != 0 {
		at := fsm.FormatMillis(st.OldestWaitingSince)
		w.OldestPendingAt, w.OldestPendingAgeMs = &at, max(0, st.AsOf-st.OldestWaitingSince)
	}
	return w
}

// handleQueueStats answers a queue's figures to whoever may read its
// tasks; a queue without tasks has zeros.
func (s *Server) handleQueueStats(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant, queue := r.PathValue("tenant"), r.PathValue("queue")
	if err := validName("queue", queue); err != nil {
		return err
	}
	if err := s.tenantAccess(id, tenant, resTasks, queue, actRead); err != nil {
		return err
	}
	st, index := s.fsm.QueueStats(tenant, queue)
	return s.readReply(w, index, queueStatsWire(st))
}

// handleQueueList lists the tenant's queues that hold tasks, with their
// figures, one page in name order; a principal with grants on some queues
// sees those.
func (s *Server) handleQueueList(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant := r.PathValue("tenant")
	q := r.URL.Query()
	after, err := base64.RawURLEncoding.DecodeString(q.Get("page_token"))
	if err != nil {
		return badRequest("page_token is not one this server returned")
	}
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return badRequest("limit must be 1 to 1000, not %q", v)
		}
		limit = n
	}
	if err := s.inTenant(id, tenant); err != nil {
		return err
	}
	visible := func(queue string) bool { return id.allow(tenant, resTasks, queue, actRead) == nil }
	list, next, index := s.fsm.ListQueues(tenant, string(after), limit, visible)
	out := make([]queueStatsJSON, len(list))
	for i, st := range list {
		out[i] = queueStatsWire(st)
	}
	token := ""
	if next != "" {
		token = base64.RawURLEncoding.EncodeToString([]byte(next))
	}
	return s.readReply(w, index, map[string]any{"queues": out, "next_page_token": token})
}
