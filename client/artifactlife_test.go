package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
)

// TestArtifactLifeSDK drives the SDK's artifact listing, deletes and
// policies against the real batond of TestMain: the paths, queries and
// bodies it sends are those the server serves, and ErrReferenced carries
// the refs.
func TestArtifactLifeSDK(t *testing.T) {
	c, err := client.New(client.Config{Endpoints: strings.Split(os.Getenv("BATON_ENDPOINTS"), ","), Token: os.Getenv("BATON_TOKEN")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const tenant = "acme"
	var ids []string
	for i, name := range []string{"sdk-life-a", "sdk-life-a", "sdk-life-b"} {
		m, err := c.UploadArtifact(ctx, tenant, name, bytes.NewReader([]byte{byte(i), 'x'}), client.UploadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.ArtifactID)
	}
	page, err := c.ListArtifacts(ctx, tenant, client.ListArtifactsOptions{Prefix: "sdk-life-", Limit: 1})
	if err != nil || len(page.Artifacts) != 1 || page.Artifacts[0] != (client.ArtifactSummary{Name: "sdk-life-a", LatestVersion: 2, Versions: 2}) || page.NextPageToken == "" {
		t.Fatalf("first page: %+v %v", page, err)
	}
	page, err = c.ListArtifacts(ctx, tenant, client.ListArtifactsOptions{Prefix: "sdk-life-", PageToken: page.NextPageToken})
	if err != nil || len(page.Artifacts) != 1 || page.Artifacts[0].Name != "sdk-life-b" || page.NextPageToken != "" {
		t.Fatalf("second page: %+v %v", page, err)
	}

	if _, err := c.SetRef(ctx, tenant, "sdk-life/keep", client.SetRefRequest{ArtifactID: ids[0]}); err != nil {
		t.Fatal(err)
	}
	err = c.DeleteArtifactVersion(ctx, tenant, "sdk-life-a", 1, "")
	var apiErr *client.Error
	if !errors.Is(err, client.ErrReferenced) || !errors.As(err, &apiErr) || !strings.Contains(fmt.Sprint(apiErr.Details["refs"]), "sdk-life/keep") {
		t.Fatalf("delete of a referenced version: %v, want ErrReferenced naming sdk-life/keep", err)
	}
	if err := c.DeleteArtifactVersion(ctx, tenant, "sdk-life-a", 1, ids[1]); !errors.Is(err, client.ErrVersionMismatch) {
		t.Errorf("delete with another id expected: %v, want ErrVersionMismatch", err)
	}
	if err := c.DeleteRef(ctx, tenant, "sdk-life/keep", ""); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteArtifactVersion(ctx, tenant, "sdk-life-a", 1, ids[0]); err != nil {
		t.Fatalf("delete after the ref went: %v", err)
	}
	one := uint64(1)
	if err := c.DeleteArtifact(ctx, tenant, "sdk-life-a", &one); !errors.Is(err, client.ErrVersionMismatch) {
		t.Errorf("whole delete expecting version 1 of a name at 2: %v, want ErrVersionMismatch", err)
	}
	if err := c.DeleteArtifact(ctx, tenant, "sdk-life-a", nil); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteArtifact(ctx, tenant, "sdk-life-a", nil); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("delete of a gone name: %v, want ErrNotFound", err)
	}
	if err := c.DeleteArtifactVersion(ctx, tenant, "sdk-life-b", 0, ""); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("delete of version 0: %v, want ErrInvalidArgument before any request", err)
	}

	p, err := c.SetArtifactPolicy(ctx, tenant, client.ArtifactPolicy{Prefix: "sdk-life-", KeepLast: 3})
	if err != nil || *p != (client.ArtifactPolicy{Prefix: "sdk-life-", KeepLast: 3}) {
		t.Fatalf("SetArtifactPolicy: %+v %v", p, err)
	}
	ps, err := c.ListArtifactPolicies(ctx, tenant)
	if err != nil || !slices.Contains(ps, client.ArtifactPolicy{Prefix: "sdk-life-", KeepLast: 3}) {
		t.Errorf("ListArtifactPolicies: %+v %v", ps, err)
	}
	if _, err := c.SetArtifactPolicy(ctx, tenant, client.ArtifactPolicy{Prefix: "sdk-life-"}); err != nil {
		t.Fatalf("clearing the policy: %v", err)
	}
}
