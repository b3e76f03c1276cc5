package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Ref is a named, movable pointer to an artifact version
// ("report-42/approved"). Revision grows by one on every move.
type Ref struct {
	Ref        string    `json:"ref"`
	ArtifactID string    `json:"artifact_id"`
	Name       string    `json:"name"`    // the artifact's name
	Version    uint64    `json:"version"` // the artifact's version
	Revision   uint64    `json:"revision"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// ExpectAbsent is the expectation of SetRef and DeleteRef that the ref does
// not exist yet. It returns a new pointer on every call.
func ExpectAbsent() *string { s := ""; return &s }

// ExpectArtifact is the expectation that the ref points at id now.
func ExpectArtifact(id string) *string { return &id }

// SetRef points ref at an artifact (by its artifact_id) by compare-and-set:
// expect nil applies unconditionally, ExpectAbsent() only if the ref does
// not exist, ExpectArtifact(id) only if it points at id now; otherwise
// ErrVersionMismatch with the current "artifact_id" in the details. A ref
// that already points at artifactID is left unchanged and returned as it
// is (same revision), whatever expect says, so a retried move is a no-op.
// ErrNotFound when the tenant has no such artifact; with fence, ErrFenced
// unless its token is the task's current one.
func (c *Client) SetRef(ctx context.Context, tenant, ref, artifactID string, expect *string, fence *Fence, opts ...RequestOption) (*Ref, error) {
	path, err := refPath(tenant, ref)
	if err != nil {
		return nil, err
	}
	if err := required("artifact id", artifactID); err != nil {
		return nil, err
	}
	req := SetRefRequest{ArtifactID: artifactID, ExpectArtifactID: expect, Fence: fence}
	var out Ref
	if _, err := c.Do(ctx, http.MethodPut, path, req, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetRef returns a ref; ErrNotFound when it does not exist.
func (c *Client) GetRef(ctx context.Context, tenant, ref string, opts ...RequestOption) (*Ref, error) {
	path, err := refPath(tenant, ref)
	if err != nil {
		return nil, err
	}
	var out Ref
	if _, err := c.Do(ctx, http.MethodGet, path, nil, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListRefs returns the refs whose name starts with prefix ("" for all), in
// name order, as far as the caller's grants let it read them. The server
// answers at most 10,000.
func (c *Client) ListRefs(ctx context.Context, tenant, prefix string, opts ...RequestOption) ([]Ref, error) {
	if err := required("tenant", tenant); err != nil {
		return nil, err
	}
	q := url.Values{}
	setIf(q, "prefix", prefix)
	var out struct {
		Refs []Ref `json:"refs"`
	}
	if _, err := c.Do(ctx, http.MethodGet, withQuery(tenantPath(tenant, "refs"), q), nil, &out, opts...); err != nil {
		return nil, err
	}
	return out.Refs, nil
}

// DeleteRef deletes a ref; with expect (ExpectArtifact(id)), only while it
// points at that artifact, else ErrVersionMismatch. ErrNotFound when it
// does not exist.
func (c *Client) DeleteRef(ctx context.Context, tenant, ref string, expect *string, opts ...RequestOption) error {
	path, err := refPath(tenant, ref)
	if err != nil {
		return err
	}
	q := url.Values{}
	if expect != nil {
		q.Set("expect_artifact_id", *expect)
	}
	_, err = c.Do(ctx, http.MethodDelete, withQuery(path, q), nil, nil, opts...)
	return err
}

// refPath builds /v1/tenants/{t}/refs/{ref...}. A ref's "/" stay
// separators and each segment is escaped; a ref with an empty, "." or ".."
// segment is refused here, since a router would rewrite such a path before
// the server could refuse it.
func refPath(tenant, ref string) (string, error) {
	if err := required("tenant", tenant, "ref", ref); err != nil {
		return "", err
	}
	segs := strings.Split(ref, "/")
	for i, s := range segs {
		if s == "" || s == "." || s == ".." {
			return "", fmt.Errorf("%w: ref %q has an empty, \".\" or \"..\" segment", ErrInvalidArgument, ref)
		}
		segs[i] = url.PathEscape(s)
	}
	return tenantPath(tenant, "refs") + "/" + strings.Join(segs, "/"), nil
}
