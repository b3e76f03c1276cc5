package client

import (
	"context"
	"net/http"

	"github.com/baton-dev/baton/fsm/wire"
)

// TenantQuota is a tenant's state quota and what its data takes (0: no
// limit). Past the quota, writes that grow the tenant's data fail with
// ErrResourceExhausted; reads, deletes and writes that do not grow it work.
type TenantQuota struct {
	Tenant   string `json:"tenant"`
	MaxBytes int64  `json:"max_bytes"`
	MaxKeys  int64  `json:"max_keys"`
	// RatePerSec and Burst bound each principal's requests (a token
	// bucket per principal on each node); past it, requests get
	// ErrRateLimited, which the client waits out and retries.
	RatePerSec float64 `json:"rate_per_sec"`
	Burst      int64   `json:"burst"`
	UsedBytes  int64   `json:"used_bytes"`
	UsedKeys   int64   `json:"used_keys"`
}

// SetTenantQuota sets a tenant's quota (admin) from q's MaxBytes, MaxKeys,
// RatePerSec and Burst; 0 is no limit.
func (c *Client) SetTenantQuota(ctx context.Context, tenant string, q TenantQuota, opts ...RequestOption) (*TenantQuota, error) {
	var out TenantQuota
	body := wire.Quota{MaxBytes: &q.MaxBytes, MaxKeys: &q.MaxKeys, RatePerSec: &q.RatePerSec, Burst: &q.Burst}
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
