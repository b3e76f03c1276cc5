package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// KVEntry is an entry of the knowledge store. Version is the log position
// of the write that produced it: it grows on every write of the key and is
// never reused, even after a delete and re-create (so it is not 1, 2, 3...).
type KVEntry struct {
	Namespace string          `json:"namespace"`
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	Version   uint64          `json:"version"`
	UpdatedAt time.Time       `json:"updated_at"`
	ExpiresAt *time.Time      `json:"expires_at"` // nil: never expires
}

// ListKVOptions selects the entries of ListKV; zero fields do not filter.
type ListKVOptions struct {
	Prefix    string // only keys starting with Prefix
	Limit     int    // page size; 0 means the server's default
	PageToken string // NextPageToken of the previous page
}

// KVList is one page of ListKV, in key order. NextPageToken is empty on the
// last page; a page that is empty but has one ended at the server's walk
// bound (10,000 entries examined, readable by the caller and live or not):
// keep going.
type KVList struct {
	Entries       []KVEntry `json:"entries"`
	NextPageToken string    `json:"next_page_token"`
}

// PutKV writes an entry (see PutKVRequest for the guards). With
// ExpectVersion set, ErrVersionMismatch when the entry is at another
// version (0: it exists); with Fence, ErrFenced when the token is not the
// task's current one. Expired entries count as absent.
func (c *Client) PutKV(ctx context.Context, tenant, namespace, key string, req PutKVRequest, opts ...RequestOption) (*KVEntry, error) {
	path, err := kvPath(tenant, namespace, key)
	if err != nil {
		return nil, err
	}
	var out KVEntry
	if _, err := c.Do(ctx, http.MethodPut, path, req, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetKV returns a live entry; ErrNotFound when it is absent or expired.
func (c *Client) GetKV(ctx context.Context, tenant, namespace, key string, opts ...RequestOption) (*KVEntry, error) {
	path, err := kvPath(tenant, namespace, key)
	if err != nil {
		return nil, err
	}
	var out KVEntry
	if _, err := c.Do(ctx, http.MethodGet, path, nil, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteKV deletes an entry; with expectVersion, only at that version (else
// ErrVersionMismatch). ErrNotFound when it is absent or expired.
func (c *Client) DeleteKV(ctx context.Context, tenant, namespace, key string, expectVersion *uint64, opts ...RequestOption) error {
	path, err := kvPath(tenant, namespace, key)
	if err != nil {
		return err
	}
	q := url.Values{}
	if expectVersion != nil {
		q.Set("expect_version", strconv.FormatUint(*expectVersion, 10))
	}
	_, err = c.Do(ctx, http.MethodDelete, withQuery(path, q), nil, nil, opts...)
	return err
}

// ListKV returns one page of the live entries of a namespace. A principal
// sees only the entries its grants let it read.
func (c *Client) ListKV(ctx context.Context, tenant, namespace string, f ListKVOptions, opts ...RequestOption) (*KVList, error) {
	if err := required("tenant", tenant, "namespace", namespace); err != nil {
		return nil, err
	}
	q := url.Values{}
	setIf(q, "prefix", f.Prefix)
	setIf(q, "page_token", f.PageToken)
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out KVList
	if _, err := c.Do(ctx, http.MethodGet, withQuery(tenantPath(tenant, "kv", namespace), q), nil, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// kvPath builds /v1/tenants/{t}/kv/{namespace}/{key...}. The key's "/"
// stay separators and each segment is escaped; a key with an empty, "." or
// ".." segment is refused here, since a router would rewrite such a path
// before the server could refuse it.
func kvPath(tenant, namespace, key string) (string, error) {
	if err := required("tenant", tenant, "namespace", namespace, "key", key); err != nil {
		return "", err
	}
	segs := strings.Split(key, "/")
	for i, s := range segs {
		if s == "" || s == "." || s == ".." {
			return "", fmt.Errorf("%w: key %q has an empty, \".\" or \"..\" segment", ErrInvalidArgument, key)
		}
		segs[i] = url.PathEscape(s)
	}
	return tenantPath(tenant, "kv", namespace) + "/" + strings.Join(segs, "/"), nil
}
