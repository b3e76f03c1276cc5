package wire

import "encoding/json"

// Bodies of the knowledge store's routes (docs/api.md "Knowledge store
// (LangGraph)"). A namespace is a list of labels.

// StoreRef names an item.
type StoreRef struct {
	Namespace []string `json:"namespace"`
	Key       string   `json:"key"`
}

// StoreWriteOp puts an item, or deletes it when Value is null or absent.
type StoreWriteOp struct {
	Namespace []string        `json:"namespace"`
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value,omitempty"` // a JSON object
	// Vectors are the item's embeddings, computed by the caller (one per
	// indexed field), all of one dimension.
	Vectors    [][]float32 `json:"vectors,omitempty"`
	TTLMinutes *float64    `json:"ttl_minutes,omitempty"` // absent: no expiry
}

// StoreWrite is the body of POST /v1/tenants/{t}/store/write.
type StoreWrite struct {
	Ops []StoreWriteOp `json:"ops"`
}

// StoreGet is the body of POST /v1/tenants/{t}/store/get.
type StoreGet struct {
	Items      []StoreRef `json:"items"`
	RefreshTTL bool       `json:"refresh_ttl,omitempty"`
}

// StoreSearch is the body of POST /v1/tenants/{t}/store/search.
type StoreSearch struct {
	NamespacePrefix []string                   `json:"namespace_prefix"`
	Filter          map[string]json.RawMessage `json:"filter,omitempty"`
	Vector          []float32                  `json:"vector,omitempty"`
	Limit           int                        `json:"limit,omitempty"`
	Offset          int                        `json:"offset,omitempty"`
	RefreshTTL      bool                       `json:"refresh_ttl,omitempty"`
}

// StoreMatch is a match condition of a namespace listing.
type StoreMatch struct {
	MatchType string   `json:"match_type"` // "prefix" or "suffix"
	Path      []string `json:"path"`
}

// StoreNamespaces is the body of POST /v1/tenants/{t}/store/namespaces.
type StoreNamespaces struct {
	MatchConditions []StoreMatch `json:"match_conditions,omitempty"`
	MaxDepth        int          `json:"max_depth,omitempty"`
	Limit           int          `json:"limit,omitempty"`
	Offset          int          `json:"offset,omitempty"`
}
