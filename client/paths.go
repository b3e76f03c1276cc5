package client

import (
	"fmt"
	"net/url"
	"strings"
)

// tenantPath builds /v1/tenants/{tenant}/{segments...}, escaping each part.
func tenantPath(tenant string, segments ...string) string {
	var b strings.Builder
	b.WriteString("/v1/tenants/")
	b.WriteString(url.PathEscape(tenant))
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// required returns ErrInvalidArgument for the first empty name, so a call
// with a missing path parameter fails before it reaches the network.
func required(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			return fmt.Errorf("%w: %s is required", ErrInvalidArgument, pairs[i])
		}
	}
	return nil
}

// withQuery appends q to path when it is not empty.
func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}
