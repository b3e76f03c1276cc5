// Package console is Baton's web console (docs/console.md): static HTML,
// CSS and JavaScript modules embedded in the binary and served at /ui/ as
// they are, with no build step. The page calls the node's public HTTP API
// (docs/api.md) from the browser with the token its user signs in with, so
// it holds no privilege of its own: what a principal's grants refuse, the
// API refuses the console too.
package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// Prefix is where the console is mounted on the API listener.
const Prefix = "/ui/"

// CSP is the Content-Security-Policy of every answer under /ui/: scripts,
// styles and connections to this origin only, images also from blob: and
// data: URLs (artifact previews), no plugins, no framing, no forms posting
// elsewhere. The page has no inline script or style.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; " +
	"connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

type file struct {
	body  []byte
	ctype string
	etag  string
}

// Handler serves the console: GET and HEAD of the embedded files under
// Prefix (Prefix itself is index.html), /ui redirected to /ui/, anything
// else 404 or 405. Files carry an ETag of their content and are
// revalidated on every load (Cache-Control: no-cache), so a new binary's
// console is what the next page load gets.
func Handler() http.Handler {
	files := map[string]file{}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ctype := mime.TypeByExtension(path.Ext(p))
		if path.Ext(p) == ".js" {
			ctype = "text/javascript; charset=utf-8" // the OS's mime table may say otherwise
		}
		files[strings.TrimPrefix(p, "assets/")] = file{body: b, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	if err != nil {
		panic("console: embedded assets unreadable: " + err.Error())
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		name, ok := strings.CutPrefix(r.URL.Path, Prefix)
		if !ok {
			http.NotFound(w, r)
			return
		}
		if name == "" {
			name = "index.html"
		}
		f, ok := files[name]
		if !ok {
			h.Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte("404 not found: " + r.URL.Path + " is not a file of the console\n"))
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "405 method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h.Set("Content-Type", f.ctype)
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", f.etag)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
	})
}
