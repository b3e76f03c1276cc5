package client

import (
	"context"
	"net/http"

	"github.com/baton-dev/baton/fsm/wire"
)

// Grant gives a principal actions on the objects of one resource whose name
// starts with Prefix. Resource is one of tasks, artifacts, refs,
// checkpoints, kv, ops, admin, or "*"; actions are read, write, delete.
type Grant = wire.Grant

// PrincipalWithToken is a newly created principal. The token is shown only
// this once; the server keeps only its hash.
type PrincipalWithToken = wire.PrincipalWithToken

// PutTenant creates a tenant (created is true) or confirms an existing one.
// Admin only.
func (c *Client) PutTenant(ctx context.Context, name string, opts ...RequestOption) (created bool, err error) {
	if err := required("tenant", name); err != nil {
		return false, err
	}
	meta, err := c.Do(ctx, http.MethodPut, tenantPath(name), nil, nil, opts...)
	return err == nil && meta.Status == http.StatusCreated, err
}

// ListTenants returns the names of all tenants. Admin only.
func (c *Client) ListTenants(ctx context.Context, opts ...RequestOption) ([]string, error) {
	var out wire.TenantList
	_, err := c.Do(ctx, http.MethodGet, "/v1/tenants", nil, &out, opts...)
	return out.Tenants, err
}

// CreatePrincipal creates a principal in tenant and returns its token.
func (c *Client) CreatePrincipal(ctx context.Context, tenant, name string, grants []Grant, opts ...RequestOption) (*PrincipalWithToken, error) {
	if err := required("tenant", tenant, "principal", name); err != nil {
		return nil, err
	}
	in := wire.PrincipalCreate{Name: name, Grants: grants}
	if in.Grants == nil {
		in.Grants = []Grant{}
	}
	var out PrincipalWithToken
	if _, err := c.Do(ctx, http.MethodPost, tenantPath(tenant, "principals"), in, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// RevokePrincipal revokes a principal: its tokens fail from the next
// request on.
func (c *Client) RevokePrincipal(ctx context.Context, tenant, name string, opts ...RequestOption) error {
	if err := required("tenant", tenant, "principal", name); err != nil {
		return err
	}
	_, err := c.Do(ctx, http.MethodDelete, tenantPath(tenant, "principals", name), nil, nil, opts...)
	return err
}

// PrincipalInfo is a principal as listed: its name and grants, never a
// token.
type PrincipalInfo = wire.PrincipalInfo

// RotatePrincipal gives a principal a new token and returns it (shown only
// this once). The old token fails from the rotation on. A retry with the
// same Idempotency-Key returns the same new token.
func (c *Client) RotatePrincipal(ctx context.Context, tenant, name string, opts ...RequestOption) (*PrincipalWithToken, error) {
	if err := required("tenant", tenant, "principal", name); err != nil {
		return nil, err
	}
	var out PrincipalWithToken
	if _, err := c.Do(ctx, http.MethodPost, tenantPath(tenant, "principals", name, "rotate"), nil, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListPrincipals lists the tenant's principals the caller may manage (the
// admin token: all of them), in name order, with their grants.
func (c *Client) ListPrincipals(ctx context.Context, tenant string, opts ...RequestOption) ([]PrincipalInfo, error) {
	if err := required("tenant", tenant); err != nil {
		return nil, err
	}
	var out wire.PrincipalList
	_, err := c.Do(ctx, http.MethodGet, tenantPath(tenant, "principals"), nil, &out, opts...)
	return out.Principals, err
}
