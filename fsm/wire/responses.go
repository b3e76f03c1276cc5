package wire

// Response bodies that the server writes and the SDK reads as they are.
// Records the state machine renders (tasks, KV entries, manifests, refs,
// checkpoints, ops, a transaction's results...) stay with their owners:
// fsm writes them and the SDK reads them into types of its own, with
// time.Time and time.Duration fields.

// PrincipalWithToken answers the creation or rotation of a principal: the
// only time its token is shown.
type PrincipalWithToken struct {
	Name   string  `json:"name"`
	Token  string  `json:"token"`
	Grants []Grant `json:"grants"`
}

// PrincipalInfo is a principal as listed: never its token.
type PrincipalInfo struct {
	Name   string  `json:"name"`
	Grants []Grant `json:"grants"`
}

// PrincipalList answers GET /v1/tenants/{t}/principals.
type PrincipalList struct {
	Principals []PrincipalInfo `json:"principals"`
}

// TenantList answers GET /v1/tenants.
type TenantList struct {
	Tenants []string `json:"tenants"`
}

// MissingChunks answers POST /v1/tenants/{t}/chunks/missing: the digests
// asked for that the tenant does not hold, in the order asked.
type MissingChunks struct {
	Missing []string `json:"missing"`
}

// LeaderInfo identifies the leader in GET /v1/cluster (all "" when no
// leader is known).
type LeaderInfo struct {
	ID       string `json:"id"`
	HTTPAddr string `json:"http_addr"`
	RaftAddr string `json:"raft_addr"`
}

// Build is a binary's version, commit and Go version, in GET /v1/cluster.
type Build struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"go_version"`
}

// Configuration answers GET /v1/internal/configuration: the members of
// the newest Raft configuration the answering node holds, and whether it
// is the leader (a quorum confirmed it as it answered). A member that
// knows no leader asks its peers for it, to learn whether it was removed.
type Configuration struct {
	NodeID  string   `json:"node_id"`
	Leader  bool     `json:"leader"`
	Servers []string `json:"servers"`
}
