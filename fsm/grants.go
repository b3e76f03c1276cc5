package fsm

import (
	"fmt"
	"strings"
)

// What grants allow (docs/api.md "Authentication and tenants"). The server
// authorizes requests with these before proposing; the commands whose
// decision depends on grants that may change meanwhile (a principal
// rotation, task writes by id) check them again here, as they apply.

// GrantAll is the resource of a grant on every resource.
const GrantAll = "*"

// GrantsAllow reports whether some grant allows action on the named object
// of resource.
func GrantsAllow(grants []Grant, resource, name, action string) bool {
	for _, g := range grants {
		if (g.Resource == resource || g.Resource == GrantAll) && PrefixCovers(g.Prefix, name) && grantHas(g, action) {
			return true
		}
	}
	return false
}

// PrefixCovers reports whether a grant's prefix covers a name. A prefix is
// a plain string prefix ("research" covers "research", "research-2" and
// "research/x"), except that one ending in "/" is bounded by the segment:
// "research/" covers "research" itself and every name under "research/",
// and nothing else (api-notes.md "Grants").
func PrefixCovers(prefix, name string) bool {
	if strings.HasPrefix(name, prefix) {
		return true
	}
	seg, ok := strings.CutSuffix(prefix, "/")
	return ok && name == seg
}

// PrefixIncludes reports whether every name prefix p covers is covered by
// have too.
func PrefixIncludes(have, p string) bool {
	if !strings.HasPrefix(p, have) {
		return false
	}
	seg, ok := strings.CutSuffix(p, "/")
	return !ok || PrefixCovers(have, seg)
}

// GrantCovered reports whether one of have allows everything want does:
// the same resource or "*", a prefix including want's, every action.
func GrantCovered(have []Grant, want Grant) bool {
	for _, h := range have {
		if (h.Resource == want.Resource || h.Resource == GrantAll) && PrefixIncludes(h.Prefix, want.Prefix) && grantHasAll(h, want.Actions) {
			return true
		}
	}
	return false
}

// uncovered returns the index of the first of want that have does not
// cover, or -1 when have covers them all.
func uncovered(have, want []Grant) int {
	for i, g := range want {
		if !GrantCovered(have, g) {
			return i
		}
	}
	return -1
}

// callerEntry is a caller's grants decoded from the principal record raw.
type callerEntry struct {
	raw    []byte
	grants []Grant
}

// callerGrants returns the grants of the principal proposing c as the
// state holds them now; ok is false when it no longer exists. Every task
// write of a principal asks, so decoded records are kept while the stored
// record is the very slice they came from (as PrincipalByToken does).
func (f *FSM) callerGrants(c *Command) (grants []Grant, ok bool) {
	raw, ok := f.st.Get(principalKey(c.Tenant, c.Principal))
	if !ok {
		return nil, false
	}
	key := c.Tenant + "\x00" + c.Principal
	if e := f.callers[key]; e != nil && sameBytes(e.raw, raw) {
		return e.grants, true
	}
	var p Principal
	if decode(raw, &p) != nil {
		return nil, false
	}
	if f.callers == nil || len(f.callers) >= 4096 { // principals come and go: start afresh
		f.callers = map[string]*callerEntry{}
	}
	f.callers[key] = &callerEntry{raw: raw, grants: p.Grants}
	return p.Grants, true
}

// Task actions checked as the command applies (taskDenied).
const (
	taskWrite  = "write"
	taskDelete = "delete"
)

// taskDenied refuses, in an entry of version 5 or later, a principal's
// write by id of task id (t, when found) outside its grants
// as they stand at this index: action on the task's queue, or, for a task
// that does not exist, on every queue. The answer is the handler's for a
// task outside the grant (server taskForbidden), so that a task that
// moved to another queue between the handler's check and the apply (its
// id deleted and created again elsewhere) is neither written nor shown.
func (f *FSM) taskDenied(c *Command, id string, t *Task, found bool, action string) *Result {
	if c.Principal == "" || c.ver < EntryVersion5 {
		return nil
	}
	queue := ""
	if found {
		queue = t.Queue
	}
	if grants, ok := f.callerGrants(c); ok && GrantsAllow(grants, "tasks", queue, action) {
		return nil
	}
	return fail(CodeForbidden, fmt.Sprintf("principal %q may not %s task %q", c.Principal, action, id), nil)
}

func grantHas(g Grant, action string) bool {
	for _, a := range g.Actions {
		if a == action {
			return true
		}
	}
	return false
}

func grantHasAll(g Grant, actions []string) bool {
	for _, a := range actions {
		if !grantHas(g, a) {
			return false
		}
	}
	return true
}
