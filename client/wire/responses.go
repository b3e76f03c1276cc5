package wire

// Response bodies that the server writes and the SDK reads as they are.
// (Most responses are records the state machine renders and the SDK reads
// into types with time.Time fields; those stay with their owners.)

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
