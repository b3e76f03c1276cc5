package fsm

// Key layout of the state. Names never contain "/" except KV keys and ref
// names, which always come last in a key, so prefixes never collide.
//
//	m/<node id>                          cluster member metadata
//	t/<tenant>                           tenant record
//	t/<tenant>/p/<principal>             principal record
//	tok/<sha256 hex of token>            token -> principal reference
//	i/<tenant>/<principal>/<idem key>    remembered idempotent response
//	ie/<expiry ms, 16 hex>/<i/ key>      idempotency expiry index
//	it/<tenant>/<expiry ms>/<i/ key>     the same, per tenant (its byte budget)
//	ih/<tenant>/<principal>              newest key time whose record is gone
//	cfg/limits                           replicated limits (limits.go)
//	cfg/lifecycle                        present once a task uses lifecycle fields (lifecycle.go)
//	cfg/checkpoints4                     present once a checkpoint uses a namespace, chunks or an escaped thread id (checkpoints.go)
//	t/<tenant>/qp/<queue>                a queue's lifecycle defaults (lifecycle.go)
//	tx/<expiry ms, 16 hex>/<tenant>/<id> a retained task's expiry (retention.go)
//	cfg/retention                        present once a task had an expiry (retention.go)
//	ss/, sa/, se/                        client sessions (sessions.go)
func memberKey(id string) string              { return "m/" + id }
func tenantKey(t string) string               { return "t/" + t }
func principalKey(t, name string) string      { return "t/" + t + "/p/" + name }
func principalPrefix(t string) string         { return "t/" + t + "/p/" }
func tokenKey(hash string) string             { return "tok/" + hash }
func idemKey(t, principal, key string) string { return "i/" + t + "/" + principal + "/" + key }
func idemExpiryKey(exp int64, ikey string) string {
	b := make([]byte, 0, len(idemExpiryPrefix)+17+len(ikey))
	b = append(b, idemExpiryPrefix...)
	b = appendHex16(b, uint64(exp))
	b = append(b, '/')
	return string(append(b, ikey...))
}

func idemTenantExpiryPrefix(t string) string { return "it/" + t + "/" }
func idemTenantExpiryKey(t string, exp int64, ikey string) string {
	return idemTenantExpiryPrefix(t) + hex16(exp) + "/" + ikey
}
func idemHorizonKey(t, principal string) string { return "ih/" + t + "/" + principal }

const (
	memberPrefix     = "m/"
	tenantRootPrefix = "t/"
	idemExpiryPrefix = "ie/"
)
