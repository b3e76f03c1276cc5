package fsm

import "fmt"

// Ref command kinds.
const (
	KindRefSet    Kind = "ref.set"
	KindRefDelete Kind = "ref.delete"
)

// Ref is a named, movable pointer to an artifact version.
type Ref struct {
	Ref        string `json:"ref"`
	ArtifactID string `json:"artifact_id"`
	Name       string `json:"name"`
	Version    uint64 `json:"version"`
	Revision   uint64 `json:"revision"`
	UpdatedAt  string `json:"updated_at"`
}

// RefSetArgs moves a ref. ExpectArtifactID "" means: must not exist.
type RefSetArgs struct {
	Ref              string
	ArtifactID       string
	ExpectArtifactID *string
	Fence            *Fence
}

// RefDeleteArgs deletes a ref.
type RefDeleteArgs struct {
	Ref              string
	ExpectArtifactID *string
}

func refKey(tenant, ref string) string { return "t/" + tenant + "/ref/" + ref }
func refPrefix(tenant string) string   { return "t/" + tenant + "/ref/" }

func checkRefExpect(cur *Ref, expect *string) *Result {
	if expect == nil {
		return nil
	}
	have := ""
	if cur != nil {
		have = cur.ArtifactID
	}
	if have != *expect {
		return fail(CodeVersionMismatch, fmt.Sprintf("ref points to %q, not %q", have, *expect),
			map[string]any{"artifact_id": have})
	}
	return nil
}

// applyRefSet moves a ref by compare-and-set. A ref already pointing at the
// requested artifact is left as it is and answered with success, so a
// retried move with the same expectation is a no-op.
func applyRefSet(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a RefSetArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if r := checkFence(f.st, c, a.Fence); r != nil {
		return r
	}
	m, ok := artifactByID(f.st, c.Tenant, a.ArtifactID)
	if !ok {
		return fail(CodeNotFound, fmt.Sprintf("artifact %q not found", a.ArtifactID), nil)
	}
	cur, _ := getRecord[Ref](f.st, refKey(c.Tenant, a.Ref))
	if cur != nil && cur.ArtifactID == a.ArtifactID {
		return okValue(OutcomeOK, cur)
	}
	if r := checkRefExpect(cur, a.ExpectArtifactID); r != nil {
		return r
	}
	ref := &Ref{Ref: a.Ref, ArtifactID: m.ArtifactID, Name: m.Name, Version: m.Version, Revision: 1,
		UpdatedAt: FormatMillis(ctx.now)}
	if cur != nil {
		ref.Revision = cur.Revision + 1
	}
	f.st.Put(refKey(c.Tenant, a.Ref), encode(ref))
	f.emit(c.Tenant, ResourceRefs, a.Ref, a.Ref, EventPut, ref)
	return okValue(OutcomeOK, ref)
}

func applyRefDelete(f *FSM, _ *applyCtx, c *Command) *Result {
	var a RefDeleteArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	cur, ok := getRecord[Ref](f.st, refKey(c.Tenant, a.Ref))
	if !ok {
		return fail(CodeNotFound, fmt.Sprintf("ref %q not found", a.Ref), nil)
	}
	if r := checkRefExpect(cur, a.ExpectArtifactID); r != nil {
		return r
	}
	f.st.Delete(refKey(c.Tenant, a.Ref))
	f.emit(c.Tenant, ResourceRefs, a.Ref, a.Ref, EventDelete, nil)
	return okValue(OutcomeNoContent, nil)
}

// GetRef returns a ref.
func (f *FSM) GetRef(tenant, ref string) (*Ref, uint64, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	r, ok := getRecord[Ref](f.st, refKey(tenant, ref))
	return r, f.applied, ok
}

// ListRefs lists refs whose name starts with prefix and that visible allows.
func (f *FSM) ListRefs(tenant, prefix string, visible func(*Ref) bool) ([]*Ref, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := []*Ref{}
	f.st.Scan(refPrefix(tenant)+prefix, "", func(_ string, v []byte) bool {
		var r Ref
		if decode(v, &r) == nil && (visible == nil || visible(&r)) {
			out = append(out, &r)
		}
		return len(out) < 10_000
	})
	return out, f.applied
}
