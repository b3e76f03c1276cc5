package wire

// ClaimNext is the claim_next member of a task update: a queue claim made
// in the same command as the update, after it (docs/api.md "Tasks"). Its
// members are those of QueueClaim but wait_ms, with the queue named here
// instead of in a path; Statuses empty is ["pending"].
type ClaimNext struct {
	Queue     string   `json:"queue"`
	Owner     string   `json:"owner"`
	LeaseMs   int64    `json:"lease_ms"`
	Statuses  []string `json:"statuses,omitempty"`
	SetStatus *string  `json:"set_status,omitempty"`
	// Max, when not 0, claims up to Max tasks; next is then their list.
	Max int64 `json:"max,omitempty"`
}

// TaskUpdateClaim is the body of POST /v1/tenants/{t}/tasks/{id}/update:
// a TaskUpdate, and with ClaimNext the next claim too, answered
// {"task": the updated task, "next": the claimed task or null}.
type TaskUpdateClaim struct {
	TaskUpdate
	ClaimNext *ClaimNext `json:"claim_next,omitempty"`
}

// QueueBatch is the body of POST /v1/tenants/{t}/queues/{queue}/batch:
// task updates, each with its own outcome, and a claim of up to Max
// tasks of the queue, in one command (docs/api.md "Tasks"), answered
// {"results": [{"task": ...} or {"error": ...}], "next": [...]}.
type QueueBatch struct {
	Updates []BatchUpdate `json:"updates,omitempty"`
	Claim   *BatchClaim   `json:"claim,omitempty"`
}

// BatchUpdate is one update of a QueueBatch: a TaskUpdate of task ID.
type BatchUpdate struct {
	ID string `json:"id"`
	TaskUpdate
}

// BatchClaim is the claim of a QueueBatch: QueueClaim's members but
// wait_ms; Max is required.
type BatchClaim struct {
	Owner     string   `json:"owner"`
	LeaseMs   int64    `json:"lease_ms"`
	Statuses  []string `json:"statuses,omitempty"`
	SetStatus *string  `json:"set_status,omitempty"`
	Max       int64    `json:"max"`
}
