package client

import (
	"context"
	"net/http"
)

// TenantQuota is a tenant's state quota and what its data takes (0: no
// limit). Past the quota, writes that grow the tenant's data fail with
// ErrResourceExhausted; reads, deletes and writes that do not grow it work.
type TenantQuota struct {
	Tenant    string `json:"tenant"`
	MaxBytes  int64  `json:"max_bytes"`
	MaxKeys   int64  `json:"max_keys"`
	UsedBytes int64  `json:"used_bytes"`
	UsedKeys  int64  `json:"used_keys"`
}

// SetTenantQuota sets a tenant's quota (admin); 0 is no limit.
func (c *Client) SetTenantQuota(ctx context.Context, tenant string, maxBytes, maxKeys int64, opts ...RequestOption) (*TenantQuota, error) {
	var out TenantQuota
	body := map[string]int64{"max_bytes": maxBytes, "max_keys": maxKeys}
	if _, err := c.Do(ctx, http.MethodPut, tenantPath(tenant, "quota"), body, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetTenantQuota returns a tenant's quota and usage.
func (c *Client) GetTenantQuota(ctx context.Context, tenant string, opts ...RequestOption) (*TenantQuota, error) {
	var out TenantQuota
	if _, err := c.Do(ctx, http.MethodGet, tenantPath(tenant, "quota"), nil, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}
