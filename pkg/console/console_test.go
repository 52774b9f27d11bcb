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

func get(t *testing.T, h http.Handler, method, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Result()
}

// The pages are served with a policy that allows nothing but this
// origin, never in a frame; /ui redirects to /ui/; nothing but GET and
// HEAD is answered.
func TestHandlerServesThePagesSafely(t *testing.T) {
	h := Handler("/ui/")
	res := get(t, h, http.MethodGet, "/ui/")
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `<script src="app.js"`) {
		t.Fatalf("GET /ui/: %d\n%s", res.StatusCode, body)
	}
	csp := res.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	if res.Header.Get("X-Content-Type-Options") != "nosniff" || res.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("headers: %v", res.Header)
	}
	if res := get(t, h, http.MethodGet, "/ui/app.js"); res.StatusCode != http.StatusOK || !strings.Contains(res.Header.Get("Content-Type"), "javascript") {
		t.Errorf("app.js: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if res := get(t, h, http.MethodGet, "/ui"); res.StatusCode != http.StatusMovedPermanently || res.Header.Get("Location") != "/ui/" {
		t.Errorf("/ui: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	if res := get(t, h, http.MethodPost, "/ui/"); res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /ui/: %d", res.StatusCode)
	}
	if res := get(t, h, http.MethodGet, "/ui/missing.js"); res.StatusCode != http.StatusNotFound {
		t.Errorf("a missing file: %d", res.StatusCode)
	}
}

// No page loads anything from the network, and no page writes HTML from
// data (every text is set as text).
func TestAssetsAreSelfContained(t *testing.T) {
	external := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|url\(\s*["']?(https?:)?//|@import|https?://`)
	err := fs.WalkDir(assets, "assets", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(assets, path)
		if err != nil {
			return err
		}
		if m := external.Find(b); m != nil {
			t.Errorf("%s refers to the network: %q", path, m)
		}
		if strings.Contains(string(b), "innerHTML") || strings.Contains(string(b), "insertAdjacentHTML") {
			t.Errorf("%s writes HTML from strings", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
