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
}

// TaskUpdateClaim is the body of POST /v1/tenants/{t}/tasks/{id}/update:
// a TaskUpdate, and with ClaimNext the next claim too, answered
// {"task": the updated task, "next": the claimed task or null}.
type TaskUpdateClaim struct {
	TaskUpdate
	ClaimNext *ClaimNext `json:"claim_next,omitempty"`
}
