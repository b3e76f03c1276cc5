//go:build !linux

package chunkstore

// writeTempDirect: direct writes are Linux's O_DIRECT only; elsewhere the
// store writes through the page cache.
func writeTempDirect(string, [][]byte) (string, error) { return "", errNoDirect }
