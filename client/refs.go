package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/baton-dev/baton/fsm/wire"
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

// SetRefRequest is the body of SetRef and of a ref.set op: point the ref
// at ArtifactID, by compare-and-set when asked.
//
//   - neither ExpectAbsent nor Expect: apply whatever the ref points at;
//   - ExpectAbsent: only if the ref does not exist yet;
//   - Expect: only if the ref points at that artifact id now.
//
// Setting both is ErrInvalidArgument. A refused expectation is
// ErrVersionMismatch with the current "artifact_id" in the details.
type SetRefRequest struct {
	ArtifactID   string `json:"artifact_id"`
	ExpectAbsent bool   `json:"-"`
	Expect       string `json:"-"`
	Fence        *Fence `json:"fence,omitempty"`
}

// wire is SetRefRequest on the wire (see durations.go).
func (r SetRefRequest) wire() (wire.RefSet, error) {
	w := wire.RefSet{ArtifactID: r.ArtifactID, Fence: r.Fence}
	switch {
	case r.ExpectAbsent && r.Expect != "":
		return w, fmt.Errorf("%w: ref expected both absent and at %q", ErrInvalidArgument, r.Expect)
	case r.ExpectAbsent:
		w.ExpectArtifactID = new(string)
	case r.Expect != "":
		w.ExpectArtifactID = &r.Expect
	}
	return w, nil
}

// MarshalJSON encodes the request as the API's body, the expectation as
// expect_artifact_id ("" for absent, left out for none).
func (r SetRefRequest) MarshalJSON() ([]byte, error) {
	w, err := r.wire()
	if err != nil {
		return nil, err
	}
	return json.Marshal(w)
}

// SetRef points ref at req.ArtifactID, under the expectation req states
// (see SetRefRequest). A ref that already points at that artifact is left
// unchanged and returned as it is (same revision), whatever the
// expectation, so a retried move is a no-op. ErrNotFound when the tenant
// has no such artifact; with req.Fence, ErrFenced unless its token is the
// task's current one.
func (c *Client) SetRef(ctx context.Context, tenant, ref string, req SetRefRequest, opts ...RequestOption) (*Ref, error) {
	path, err := refPath(tenant, ref)
	if err != nil {
		return nil, err
	}
	if err := required("artifact id", req.ArtifactID); err != nil {
		return nil, err
	}
	w, err := req.wire()
	if err != nil {
		return nil, err
	}
	var out Ref
	if _, err := c.Do(ctx, http.MethodPut, path, w, &out, opts...); err != nil {
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

// DeleteRef deletes a ref; with expectArtifactID not empty, only while it
// points at that artifact, else ErrVersionMismatch. ErrNotFound when it
// does not exist.
func (c *Client) DeleteRef(ctx context.Context, tenant, ref, expectArtifactID string, opts ...RequestOption) error {
	path, err := refPath(tenant, ref)
	if err != nil {
		return err
	}
	q := url.Values{}
	setIf(q, "expect_artifact_id", expectArtifactID)
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
