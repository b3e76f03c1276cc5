package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// LoadOrCreateToken returns the admin token stored in path, creating the
// file (mode 0600, a NewToken) when it does not exist. created tells which.
// A file that exists but holds no usable token is an error, never replaced.
func LoadOrCreateToken(path string) (token string, created bool, err error) {
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		token = strings.TrimSpace(string(b))
		if token == "" || strings.ContainsAny(token, " \t\r\n") {
			return "", false, fmt.Errorf("cluster: %s does not hold a token (one line, no spaces); delete it to get a new one", path)
		}
		return token, false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", false, fmt.Errorf("cluster: read token: %w", err)
	}
	token = NewToken()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) { // created meanwhile by another process
		return LoadOrCreateToken(path)
	}
	if err != nil {
		return "", false, fmt.Errorf("cluster: create token: %w", err)
	}
	if _, err := f.WriteString(token + "\n"); err != nil {
		f.Close()
		return "", false, fmt.Errorf("cluster: write token: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", false, fmt.Errorf("cluster: write token: %w", err)
	}
	return token, true, nil
}
