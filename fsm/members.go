package fsm

// Member is the replicated metadata of a cluster node: how to reach its HTTP
// API, so that followers can forward to the leader.
type Member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
}

// MemberDeleteArgs forgets a member's metadata.
type MemberDeleteArgs struct{ ID string }

func applyMemberSet(f *FSM, _ *applyCtx, c *Command) *Result {
	var m Member
	if r := decodeArgs(c, &m); r != nil {
		return r
	}
	if m.ID == "" {
		return fail(CodeInvalidArgument, "member id is empty", nil)
	}
	f.st.Put(memberKey(m.ID), encode(&m))
	return okValue(OutcomeOK, &m)
}

func applyMemberDelete(f *FSM, _ *applyCtx, c *Command) *Result {
	var a MemberDeleteArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	f.st.Delete(memberKey(a.ID))
	return okValue(OutcomeNoContent, nil)
}

// Members returns the metadata of every known member, by id.
func (f *FSM) Members() map[string]Member {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := map[string]Member{}
	f.st.Scan(memberPrefix, "", func(_ string, v []byte) bool {
		var m Member
		if decode(v, &m) == nil {
			out[m.ID] = m
		}
		return true
	})
	return out
}
