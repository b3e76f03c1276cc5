package fsm

import "strings"

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
