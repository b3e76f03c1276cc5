package console

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, path string, hdr map[string]string) *http.Response {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

// Every answer under /ui/ carries the security headers, the page itself
// included, and errors too.
func TestSecurityHeaders(t *testing.T) {
	h := Handler()
	for _, p := range []string{"/ui/", "/ui/app.js", "/ui/style.css", "/ui/nope.js", "/ui"} {
		res := get(t, h, "GET", p, nil)
		if got := res.Header.Get("Content-Security-Policy"); got != CSP {
			t.Errorf("%s: Content-Security-Policy %q", p, got)
		}
		if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s: X-Content-Type-Options %q", p, got)
		}
		if got := res.Header.Get("X-Frame-Options"); got != "DENY" {
			t.Errorf("%s: X-Frame-Options %q", p, got)
		}
	}
	for _, want := range []string{"frame-ancestors 'none'", "script-src 'self'", "default-src 'none'", "connect-src 'self'"} {
		if !strings.Contains(CSP, want) {
			t.Errorf("CSP lacks %s", want)
		}
	}
}

func TestServesFiles(t *testing.T) {
	h := Handler()
	cases := []struct{ path, ctype, contains string }{
		{"/ui/", "text/html; charset=utf-8", `<script type="module" src="app.js">`},
		{"/ui/index.html", "text/html; charset=utf-8", "<main"},
		{"/ui/app.js", "text/javascript; charset=utf-8", "import"},
		{"/ui/style.css", "text/css; charset=utf-8", "@media"},
	}
	for _, c := range cases {
		res := get(t, h, "GET", c.path, nil)
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 || res.Header.Get("Content-Type") != c.ctype || !strings.Contains(string(body), c.contains) {
			t.Errorf("%s: %d %q, body has %q: %v", c.path, res.StatusCode, res.Header.Get("Content-Type"), c.contains, strings.Contains(string(body), c.contains))
		}
		if res.Header.Get("Cache-Control") != "no-cache" || res.Header.Get("ETag") == "" {
			t.Errorf("%s: Cache-Control %q ETag %q", c.path, res.Header.Get("Cache-Control"), res.Header.Get("ETag"))
		}
		again := get(t, h, "GET", c.path, map[string]string{"If-None-Match": res.Header.Get("ETag")})
		if again.StatusCode != http.StatusNotModified {
			t.Errorf("%s with its ETag: %d, want 304", c.path, again.StatusCode)
		}
	}
	if res := get(t, h, "GET", "/ui", nil); res.StatusCode != http.StatusMovedPermanently || res.Header.Get("Location") != "/ui/" {
		t.Errorf("/ui: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	if res := get(t, h, "HEAD", "/ui/app.js", nil); res.StatusCode != 200 {
		t.Errorf("HEAD: %d", res.StatusCode)
	}
	for _, p := range []string{"/ui/missing.js", "/ui/../console.go", "/ui/assets/app.js", "/uix"} {
		if res := get(t, h, "GET", p, nil); res.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", p, res.StatusCode)
		}
	}
	if res := get(t, h, "POST", "/ui/app.js", nil); res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: %d, Allow %q", res.StatusCode, res.Header.Get("Allow"))
	}
}

// The CSP forbids inline scripts and styles and other origins: the page
// must hold none, and every module it imports must be embedded.
func TestAssetsFitTheCSP(t *testing.T) {
	files := map[string]string{}
	_ = fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := assets.ReadFile(p)
			files[strings.TrimPrefix(p, "assets/")] = string(b)
		}
		return err
	})
	inline := regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]|<style|\sstyle=|\son[a-z]+=|https?://`)
	if m := inline.FindString(files["index.html"]); m != "" {
		t.Errorf("index.html has %q, which the CSP refuses", m)
	}
	imp := regexp.MustCompile(`(?m)^import .* from "\./([^"]+)";`)
	n := 0
	for name, body := range files {
		if !strings.HasSuffix(name, ".js") {
			continue
		}
		for _, m := range imp.FindAllStringSubmatch(body, -1) {
			n++
			if _, ok := files[m[1]]; !ok {
				t.Errorf("%s imports %s, which is not embedded", name, m[1])
			}
		}
		if strings.Contains(body, "innerHTML") || strings.Contains(body, "eval(") || strings.Contains(body, "new Function") {
			t.Errorf("%s builds markup or code from strings", name)
		}
		if strings.Contains(body, "localStorage") || strings.Contains(body, "document.cookie") {
			t.Errorf("%s keeps state outside sessionStorage", name)
		}
	}
	if n < 4 {
		t.Errorf("found %d imports; the pattern no longer matches the modules", n)
	}
}
