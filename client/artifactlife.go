package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/baton-dev/baton/fsm/wire"
)

// Listing artifact names, deleting versions and keep-last policies
// (docs/api.md "Chunks and artifacts").

// ArtifactSummary is one name of an artifact listing.
type ArtifactSummary struct {
	Name          string `json:"name"`
	LatestVersion uint64 `json:"latest_version"` // the newest version that exists
	Versions      int    `json:"versions"`       // how many versions exist
}

// ArtifactList is one page of ListArtifacts.
type ArtifactList struct {
	Artifacts []ArtifactSummary `json:"artifacts"`
	// NextPageToken asks for the next page; "" on the last one. A page
	// may be empty and still have one (it ended at the server's walk
	// bound, 10,000 names examined): keep going.
	NextPageToken string `json:"next_page_token"`
}

// ListArtifactsOptions select a page of ListArtifacts.
type ListArtifactsOptions struct {
	Prefix    string // names starting with it; "" for all
	Limit     int    // 1 to 1000; 0: the server's default (100)
	PageToken string // a previous page's NextPageToken
}

// ListArtifacts returns one page of the tenant's artifact names, each with
// its newest version and how many versions it has. A principal sees only
// the names its grants let it read.
func (c *Client) ListArtifacts(ctx context.Context, tenant string, f ListArtifactsOptions, opts ...RequestOption) (*ArtifactList, error) {
	if err := required("tenant", tenant); err != nil {
		return nil, err
	}
	q := url.Values{}
	setIf(q, "prefix", f.Prefix)
	setIf(q, "page_token", f.PageToken)
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out ArtifactList
	if _, err := c.Do(ctx, http.MethodGet, withQuery(tenantPath(tenant, "artifacts"), q), nil, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteArtifactVersion deletes one version of an artifact; with
// expectArtifactID not empty, only while the version has that id (else
// ErrVersionMismatch). ErrReferenced, with the refs in the details, while a
// ref points at it; ErrNotFound when there is no such version. Its chunks
// are collected later by the server's chunk GC.
func (c *Client) DeleteArtifactVersion(ctx context.Context, tenant, name string, version uint64, expectArtifactID string, opts ...RequestOption) error {
	if err := artifactName(tenant, name); err != nil {
		return err
	}
	if version == 0 {
		return required("version", "")
	}
	q := url.Values{}
	setIf(q, "expect_artifact_id", expectArtifactID)
	path := tenantPath(tenant, "artifacts", name, "versions", strconv.FormatUint(version, 10))
	_, err := c.Do(ctx, http.MethodDelete, withQuery(path, q), nil, nil, opts...)
	return err
}

// DeleteArtifact deletes every version of an artifact; with expectVersion,
// only while its newest version is that one (else ErrVersionMismatch).
// ErrReferenced while a ref points at any version.
//
// The server deletes a name in one step only up to a bound of chunk
// references (65,536, every version's chunks counted); past it, it says so
// and DeleteArtifact deletes the versions one by one, oldest first, each
// only while it has the artifact id it was listed with. Versions published
// meanwhile stay; an error midway leaves the newer versions, and calling
// again carries on.
func (c *Client) DeleteArtifact(ctx context.Context, tenant, name string, expectVersion *uint64, opts ...RequestOption) error {
	if err := artifactName(tenant, name); err != nil {
		return err
	}
	q := url.Values{}
	if expectVersion != nil {
		q.Set("expect_version", strconv.FormatUint(*expectVersion, 10))
	}
	_, err := c.Do(ctx, http.MethodDelete, withQuery(tenantPath(tenant, "artifacts", name), q), nil, nil, opts...)
	var e *Error
	if errors.As(err, &e) && e.Code == wire.CodeInvalidArgument && e.Details["delete_by_version"] == true {
		return c.deleteByVersion(ctx, tenant, name, expectVersion, opts)
	}
	return err
}

// deleteByVersion deletes every version of name one by one, oldest first,
// for DeleteArtifact. Each delete is its own write: a key the caller gave
// for the whole delete is not reused for them (the same key with another
// request is refused), and the artifact id guard makes each safe to retry.
func (c *Client) deleteByVersion(ctx context.Context, tenant, name string, expectVersion *uint64, opts []RequestOption) error {
	versions, err := c.ListVersions(ctx, tenant, name, opts...)
	if err != nil {
		return err
	}
	if len(versions) == 0 {
		return nil // another delete took them
	}
	if newest := versions[len(versions)-1].Version; expectVersion != nil && *expectVersion != newest {
		return &Error{Status: http.StatusConflict, Code: wire.CodeVersionMismatch,
			Message: fmt.Sprintf("artifact %q is at version %d, not %d", name, newest, *expectVersion),
			Details: map[string]any{"current_version": json.Number(strconv.FormatUint(newest, 10))}}
	}
	each := append(slices.Clip(opts), func(o *requestOptions) { o.idempotencyKey = "" })
	for _, m := range versions {
		err := c.DeleteArtifactVersion(ctx, tenant, name, m.Version, m.ArtifactID, each...)
		if err != nil && !errors.Is(err, ErrNotFound) { // gone already: by another delete, or a policy
			return err
		}
	}
	return nil
}

// ArtifactPolicy keeps the newest KeepLast versions of every artifact name
// starting with Prefix: publishing a version deletes older ones, except
// those a ref points at. KeepLast 0 clears the prefix's policy.
type ArtifactPolicy struct {
	Prefix   string `json:"prefix"`
	KeepLast uint64 `json:"keep_last"`
}

// SetArtifactPolicy sets (KeepLast 0: clears) a prefix's keep-last policy.
// It takes the admin token or a grant with artifacts write and delete
// covering every name under the prefix (else ErrForbidden).
func (c *Client) SetArtifactPolicy(ctx context.Context, tenant string, p ArtifactPolicy, opts ...RequestOption) (*ArtifactPolicy, error) {
	if err := required("tenant", tenant); err != nil {
		return nil, err
	}
	var out ArtifactPolicy
	if _, err := c.Do(ctx, http.MethodPut, tenantPath(tenant, "artifact-policies"), p.wire(), &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListArtifactPolicies returns the tenant's keep-last policies in prefix
// order.
func (c *Client) ListArtifactPolicies(ctx context.Context, tenant string, opts ...RequestOption) ([]ArtifactPolicy, error) {
	if err := required("tenant", tenant); err != nil {
		return nil, err
	}
	var out struct {
		Policies []ArtifactPolicy `json:"policies"`
	}
	if _, err := c.Do(ctx, http.MethodGet, tenantPath(tenant, "artifact-policies"), nil, &out, opts...); err != nil {
		return nil, err
	}
	return out.Policies, nil
}
