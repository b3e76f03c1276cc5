package client

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/baton-dev/baton/fsm/wire"
)

// The knowledge store behind LangGraph's BaseStore (docs/api.md
// "Knowledge store (LangGraph)"): JSON objects under namespaces of labels,
// with search, filters, k-nearest scoring over the caller's vectors, and
// TTLs refreshed on read.

// StoreItem is an item of the knowledge store. Score is the cosine
// similarity to a search's vector (nil without one, or for an item with
// no vector).
type StoreItem struct {
	Namespace []string        `json:"namespace"`
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
	ExpiresAt *time.Time      `json:"expires_at"` // nil: no TTL
	Score     *float64        `json:"score"`
}

// StoreRef names an item.
type StoreRef struct {
	Namespace []string
	Key       string
}

// StoreOp puts an item (Value set: anything that encodes to a JSON object)
// or deletes it (Value nil). Vectors are the item's embeddings, all of one
// dimension; TTL, rounded to the millisecond, makes it expire (0: never).
type StoreOp struct {
	Namespace []string
	Key       string
	Value     any
	Vectors   [][]float32
	TTL       time.Duration
}

// StoreWrite applies ops (at most 256) all or nothing.
func (c *Client) StoreWrite(ctx context.Context, tenant string, ops []StoreOp, opts ...RequestOption) error {
	if err := required("tenant", tenant); err != nil {
		return err
	}
	in := wire.StoreWrite{Ops: make([]wire.StoreWriteOp, len(ops))}
	for i, op := range ops {
		w := wire.StoreWriteOp{Namespace: op.Namespace, Key: op.Key, Vectors: op.Vectors}
		if op.Value != nil {
			b, err := json.Marshal(op.Value)
			if err != nil {
				return err
			}
			w.Value = b
		}
		if op.TTL > 0 {
			m := float64(op.TTL.Milliseconds()) / 60_000
			w.TTLMinutes = &m
		}
		in.Ops[i] = w
	}
	_, err := c.Do(ctx, http.MethodPost, tenantPath(tenant, "store", "write"), in, nil, opts...)
	return err
}

// StoreGet reads several items in one round trip: nil for one absent or
// expired. refreshTTL moves the expiry of those read that have a TTL.
func (c *Client) StoreGet(ctx context.Context, tenant string, refs []StoreRef, refreshTTL bool, opts ...RequestOption) ([]*StoreItem, error) {
	if err := required("tenant", tenant); err != nil {
		return nil, err
	}
	in := wire.StoreGet{Items: make([]wire.StoreRef, len(refs)), RefreshTTL: refreshTTL}
	for i, r := range refs {
		in.Items[i] = wire.StoreRef{Namespace: r.Namespace, Key: r.Key}
	}
	var out struct {
		Items []*StoreItem `json:"items"`
	}
	if _, err := c.Do(ctx, http.MethodPost, tenantPath(tenant, "store", "get"), in, &out, opts...); err != nil {
		return nil, err
	}
	return out.Items, nil
}

// StoreSearchRequest is a search under a namespace prefix (nil or empty:
// every item). Filter maps a field to a value or to operators ($eq $ne
// $gt $gte $lt $lte); with Vector the answer is by descending cosine
// similarity. Limit 0 is the server's default (10).
type StoreSearchRequest struct {
	Prefix     []string
	Filter     map[string]any
	Vector     []float32
	Limit      int
	Offset     int
	RefreshTTL bool
}

// StoreSearchResult is a search's answer; Truncated: the server stopped at
// its scan bound (batond --store-scan-max), so narrow the prefix.
type StoreSearchResult struct {
	Items     []StoreItem `json:"items"`
	Truncated bool        `json:"truncated"`
}

// StoreSearch searches the knowledge store.
func (c *Client) StoreSearch(ctx context.Context, tenant string, req StoreSearchRequest, opts ...RequestOption) (*StoreSearchResult, error) {
	if err := required("tenant", tenant); err != nil {
		return nil, err
	}
	in := wire.StoreSearch{NamespacePrefix: req.Prefix, Vector: req.Vector, Limit: req.Limit, Offset: req.Offset,
		RefreshTTL: req.RefreshTTL}
	if in.NamespacePrefix == nil {
		in.NamespacePrefix = []string{}
	}
	if len(req.Filter) > 0 {
		in.Filter = map[string]json.RawMessage{}
		for k, v := range req.Filter {
			b, err := json.Marshal(v)
			if err != nil {
				return nil, err
			}
			in.Filter[k] = b
		}
	}
	var out StoreSearchResult
	if _, err := c.Do(ctx, http.MethodPost, tenantPath(tenant, "store", "search"), in, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// StoreNamespacesRequest lists namespaces: those starting with Prefix and
// ending with Suffix ("*" matches any one label), cut to MaxDepth labels
// (0: whole). Limit 0 is the server's default (100).
type StoreNamespacesRequest struct {
	Prefix, Suffix []string
	MaxDepth       int
	Limit, Offset  int
}

// StoreNamespaces is a namespace listing's answer.
type StoreNamespaces struct {
	Namespaces [][]string `json:"namespaces"`
	Truncated  bool       `json:"truncated"`
}

// ListStoreNamespaces lists the namespaces that hold items.
func (c *Client) ListStoreNamespaces(ctx context.Context, tenant string, req StoreNamespacesRequest, opts ...RequestOption) (*StoreNamespaces, error) {
	if err := required("tenant", tenant); err != nil {
		return nil, err
	}
	in := wire.StoreNamespaces{MaxDepth: req.MaxDepth, Limit: req.Limit, Offset: req.Offset}
	if len(req.Prefix) > 0 {
		in.MatchConditions = append(in.MatchConditions, wire.StoreMatch{MatchType: "prefix", Path: req.Prefix})
	}
	if len(req.Suffix) > 0 {
		in.MatchConditions = append(in.MatchConditions, wire.StoreMatch{MatchType: "suffix", Path: req.Suffix})
	}
	var out StoreNamespaces
	if _, err := c.Do(ctx, http.MethodPost, tenantPath(tenant, "store", "namespaces"), in, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}
