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

// artifactName checks a call's tenant and artifact name before anything
// is sent: a name outside the grammar of docs/api.md (one holding "/", as
// a ref's may) would reach no versions route on the server.
func artifactName(tenant, name string) error {
	if err := required("tenant", tenant, "artifact name", name); err != nil {
		return err
	}
	if !ValidName(name) {
		return fmt.Errorf("%w: artifact name %q must match [A-Za-z0-9][A-Za-z0-9._:-]{0,127} (no \"/\")", ErrInvalidArgument, name)
	}
	return nil
}

// ValidName reports whether s is a name by the grammar of docs/api.md,
// [A-Za-z0-9][A-Za-z0-9._:-]{0,127}: a tenant, queue, task id, artifact
// name, namespace, thread, checkpoint id, op id, principal or owner.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != ':' && c != '-') {
			return false
		}
	}
	return true
}

// withQuery appends q to path when it is not empty.
func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}
