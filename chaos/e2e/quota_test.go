package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
)

// TestTenantQuotaRefusesGrowth: on real processes, a tenant that reaches
// its quota gets resource_exhausted (507) for writes that grow its data,
// other tenants keep writing, and deleting data lets it write again; the
// quota and usage read the same through every node.
func TestTenantQuotaRefusesGrowth(t *testing.T) {
	c := startCluster(t, 3)
	ctx := ctxFor(t, 60*time.Second)
	admin := adminClient(t, c)
	for _, tn := range []string{"small", "other"} {
		if _, err := admin.PutTenant(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	q, err := admin.SetTenantQuota(ctx, "small", client.TenantQuota{MaxKeys: 20})
	if err != nil {
		t.Fatal(err)
	}
	if q.MaxKeys != 20 || q.UsedKeys == 0 {
		t.Fatalf("quota after setting: %+v", q)
	}
	put := func(tenant string, i int) error {
		_, err := admin.PutKV(ctx, tenant, "ns", fmt.Sprint("k", i), client.PutKVRequest{Value: json.RawMessage(`"value"`)})
		return err
	}
	refusedAt := -1
	for i := 0; i < 40; i++ {
		err := put("small", i)
		if errors.Is(err, client.ErrResourceExhausted) {
			refusedAt = i
			break
		}
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	if refusedAt < 0 {
		t.Fatal("40 puts under a quota of 20 keys: none refused")
	}
	var e *client.Error
	if err := put("small", refusedAt); !errors.As(err, &e) || e.Status != 507 {
		t.Errorf("put over the quota: %v, want HTTP 507 resource_exhausted", err)
	}
	if _, err := admin.GetKV(ctx, "small", "ns", fmt.Sprint("k", refusedAt)); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("the refused put: got %v, want not_found (nothing applied)", err)
	}
	for i := 0; i < 30; i++ {
		if err := put("other", i); err != nil {
			t.Fatalf("another tenant's put %d: %v", i, err)
		}
	}
	if err := admin.DeleteKV(ctx, "small", "ns", "k0", nil); err != nil {
		t.Fatalf("delete over the quota: %v", err)
	}
	if err := put("small", refusedAt); err != nil {
		t.Errorf("put after a delete made room: %v", err)
	}
	for i := 0; i < 3; i++ {
		got, err := nodeClient(t, c, i, c.AdminToken()).GetTenantQuota(ctx, "small")
		if err != nil {
			t.Fatal(err)
		}
		if got.MaxKeys != 20 || got.UsedKeys > 20 {
			t.Errorf("%s: quota %+v", c.ID(i), got)
		}
	}
}
