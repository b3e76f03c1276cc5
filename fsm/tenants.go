package fsm

import (
	"fmt"

	"github.com/baton-dev/baton/fsm/wire"
)

// Grant allows actions on one resource's objects whose names start with
// Prefix. Principal records store it as it is on the wire.
type Grant = wire.Grant

// Tenant is a tenant record.
type Tenant struct {
	Name      string `json:"name"`
	CreatedAt int64  `json:"-" codec:"CreatedAt"`
}

// Principal is an identity inside a tenant. Only a hash of its token is kept;
// stored records are msgpack, which honours json tags, so fields hidden from
// JSON carry a codec tag to stay in the record.
// TokenSalt lets the server holding the admin secret re-derive the token for
// an idempotent replay of the creating request.
type Principal struct {
	Tenant    string  `json:"tenant"`
	Name      string  `json:"name"`
	Grants    []Grant `json:"grants"`
	TokenHash string  `json:"-" codec:"TokenHash"`
	TokenSalt string  `json:"token_salt"`
	CreatedAt int64   `json:"-" codec:"CreatedAt"`
}

// principalRef is the value of a token index entry.
type principalRef struct {
	Tenant, Name string
}

// TenantPutArgs creates a tenant if it does not exist.
type TenantPutArgs struct{ Name string }

// PrincipalCreateArgs creates a principal with a token the leader generated.
type PrincipalCreateArgs struct {
	Name      string
	Grants    []Grant
	TokenHash string
	TokenSalt string
}

// PrincipalDeleteArgs revokes a principal and its token.
type PrincipalDeleteArgs struct {
	Name string
	// DropKeys: the principal's Idempotency-Key records go with it too,
	// so that a principal created again under the name does not replay
	// (or refuse as mismatched) the old one's requests. Only in
	// EntryVersion5 entries (entryVersion); older deletes kept them.
	DropKeys bool `codec:",omitempty"`
}

func (a *PrincipalDeleteArgs) entryVersion() byte {
	if a.DropKeys {
		return EntryVersion5
	}
	return 0
}

// PrincipalRotateArgs gives a principal a new token the leader generated;
// the old token fails from this command's log index on.
type PrincipalRotateArgs struct {
	Name      string
	TokenHash string
	TokenSalt string
	// ByGrants: the caller (Command.Principal, not the admin) must, as the
	// command applies, hold an admin write grant on Name and grants that
	// cover every grant of the principal rotated, since it receives that
	// principal's token. Checked here, not only by the handler, so that a
	// principal re-created meanwhile with wider grants is not handed out.
	// Only in EntryVersion5 entries (entryVersion).
	ByGrants bool `codec:",omitempty"`
}

func (a *PrincipalRotateArgs) entryVersion() byte {
	if a.ByGrants {
		return EntryVersion5
	}
	return 0
}

func applyTenantPut(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a TenantPutArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if _, ok := f.st.Get(tenantKey(a.Name)); ok {
		return okValue(OutcomeOK, map[string]string{"name": a.Name})
	}
	f.st.Put(tenantKey(a.Name), encode(&Tenant{Name: a.Name, CreatedAt: ctx.now}))
	return okValue(OutcomeCreated, map[string]string{"name": a.Name})
}

func applyPrincipalCreate(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a PrincipalCreateArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if _, ok := f.st.Get(tenantKey(c.Tenant)); !ok {
		return fail(CodeNotFound, fmt.Sprintf("tenant %q not found", c.Tenant), nil)
	}
	if _, ok := f.st.Get(principalKey(c.Tenant, a.Name)); ok {
		return fail(CodeAlreadyExists, fmt.Sprintf("principal %q already exists", a.Name), nil)
	}
	if _, ok := f.st.Get(tokenKey(a.TokenHash)); ok || a.TokenHash == "" {
		return fail(CodeInvalidArgument, "token hash is empty or already in use", nil)
	}
	p := &Principal{Tenant: c.Tenant, Name: a.Name, Grants: a.Grants, TokenHash: a.TokenHash,
		TokenSalt: a.TokenSalt, CreatedAt: ctx.now}
	if p.Grants == nil {
		p.Grants = []Grant{}
	}
	f.st.Put(principalKey(c.Tenant, a.Name), encode(p))
	f.st.Put(tokenKey(a.TokenHash), encode(&principalRef{Tenant: c.Tenant, Name: a.Name}))
	return okValue(OutcomeCreated, p)
}

// getPrincipal reads a principal's record, or answers not_found.
func getPrincipal(st *Store, tenant, name string) (*Principal, *Result) {
	raw, ok := st.Get(principalKey(tenant, name))
	if !ok {
		return nil, fail(CodeNotFound, fmt.Sprintf("principal %q not found", name), nil)
	}
	var p Principal
	if err := decode(raw, &p); err != nil {
		return nil, fail(CodeInvalidArgument, "corrupt principal record", nil)
	}
	return &p, nil
}

func applyPrincipalDelete(f *FSM, _ *applyCtx, c *Command) *Result {
	var a PrincipalDeleteArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	p, r := getPrincipal(f.st, c.Tenant, a.Name)
	if r != nil {
		return r
	}
	f.st.Delete(principalKey(c.Tenant, a.Name))
	f.st.Delete(tokenKey(p.TokenHash))
	f.principals.Delete(p.TokenHash)
	// Its client sessions go with it: a principal created again under the
	// name must not find (and replay) the old one's answers.
	var sessions []string
	f.st.Scan(sessionsOf(c.Tenant, a.Name), "", func(k string, _ []byte) bool {
		sessions = append(sessions, k)
		return true
	})
	for _, k := range sessions {
		f.dropSession(k)
	}
	if a.DropKeys {
		f.dropIdemOf(c.Tenant, a.Name)
	}
	return okValue(OutcomeNoContent, nil)
}

func applyPrincipalRotate(f *FSM, _ *applyCtx, c *Command) *Result {
	var a PrincipalRotateArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	p, r := getPrincipal(f.st, c.Tenant, a.Name)
	if r != nil {
		return r
	}
	if a.ByGrants {
		if r := mayRotate(f.st, c, p); r != nil {
			return r
		}
	}
	if _, ok := f.st.Get(tokenKey(a.TokenHash)); ok || a.TokenHash == "" {
		return fail(CodeInvalidArgument, "token hash is empty or already in use", nil)
	}
	f.st.Delete(tokenKey(p.TokenHash))
	f.principals.Delete(p.TokenHash)
	p.TokenHash, p.TokenSalt = a.TokenHash, a.TokenSalt
	f.st.Put(principalKey(c.Tenant, a.Name), encode(p))
	f.st.Put(tokenKey(a.TokenHash), encode(&principalRef{Tenant: c.Tenant, Name: a.Name}))
	return okValue(OutcomeOK, p)
}

// mayRotate checks that the principal calling c may rotate p: it still
// exists, holds an admin write grant on p's name, and grants covering all
// of p's (the admin token, Principal "", is never checked).
func mayRotate(st *Store, c *Command, p *Principal) *Result {
	if c.Principal == "" {
		return nil
	}
	caller, r := getPrincipal(st, c.Tenant, c.Principal)
	if r != nil {
		return fail(CodeForbidden, fmt.Sprintf("principal %q no longer exists", c.Principal), nil)
	}
	if !GrantsAllow(caller.Grants, "admin", p.Name, "write") {
		return fail(CodeForbidden, fmt.Sprintf("principal %q has no write grant on admin %q", c.Principal, p.Name), nil)
	}
	if i := uncovered(caller.Grants, p.Grants); i >= 0 {
		g := p.Grants[i]
		return fail(CodeForbidden, fmt.Sprintf("principal %q holds a grant (%s %q %v) that principal %q does not: rotating it would hand over more than %q holds",
			p.Name, g.Resource, g.Prefix, g.Actions, c.Principal, c.Principal), nil)
	}
	return nil
}

// Principals lists a tenant's principals in name order.
func (f *FSM) Principals(tenant string) []Principal {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := []Principal{}
	f.st.Scan(principalPrefix(tenant), "", func(_ string, v []byte) bool {
		var p Principal
		if decode(v, &p) == nil {
			out = append(out, p)
		}
		return true
	})
	return out
}

// TenantExists reports whether the tenant exists.
func (f *FSM) TenantExists(name string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, ok := f.st.Get(tenantKey(name))
	return ok
}

// Tenants lists tenant names in order.
func (f *FSM) Tenants() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := []string{}
	f.st.Scan(tenantRootPrefix, "", func(k string, _ []byte) bool {
		if name := k[len(tenantRootPrefix):]; !containsSlash(name) {
			out = append(out, name)
		}
		return true
	})
	return out
}

// PrincipalByToken finds the principal whose token hashes to hash.
func (f *FSM) PrincipalByToken(hash string) (*Principal, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	raw, ok := f.st.Get(tokenKey(hash))
	if !ok {
		f.principals.Delete(hash)
		return nil, false
	}
	// Every request authenticates, so decoded principals are cached. An
	// entry is used only while both stored records are the very byte
	// slices it was decoded from: stored values are never modified in
	// place, so any change (re-creation, revocation, new grants) is a new
	// slice and misses.
	if e, ok := f.principals.Load(hash); ok {
		ce := e.(*principalCacheEntry)
		if sameBytes(ce.refRaw, raw) {
			if praw, ok := f.st.Get(principalKey(ce.p.Tenant, ce.p.Name)); ok && sameBytes(ce.pRaw, praw) {
				return ce.p, true
			}
		}
	}
	p, praw, ok := f.principalByRef(raw, hash)
	if !ok {
		f.principals.Delete(hash)
		return nil, false
	}
	f.principals.Store(hash, &principalCacheEntry{refRaw: raw, pRaw: praw, p: p})
	return p, true
}

type principalCacheEntry struct {
	refRaw, pRaw []byte
	p            *Principal // shared: callers must not modify it
}

// sameBytes reports whether a and b are the same slice (not merely equal).
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

func (f *FSM) principalByRef(raw []byte, hash string) (*Principal, []byte, bool) {
	var ref principalRef
	if decode(raw, &ref) != nil {
		return nil, nil, false
	}
	praw, ok := f.st.Get(principalKey(ref.Tenant, ref.Name))
	if !ok {
		return nil, nil, false
	}
	var p Principal
	if decode(praw, &p) != nil || p.TokenHash != hash {
		return nil, nil, false // a revoked token never maps to a later principal of the same name
	}
	return &p, praw, true
}

func containsSlash(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return true
		}
	}
	return false
}
