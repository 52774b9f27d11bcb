package console

import (
	"fmt"
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
	h := Handler("/ui/", false)
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
	if res := get(t, h, http.MethodGet, "/ui"); res.StatusCode != http.StatusMovedPermanently || res.Header.Get("Location") != "/ui/" ||
		!strings.Contains(res.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Errorf("/ui: %d %v", res.StatusCode, res.Header)
	}
	// Asked again each time, and not sent again while it is the same.
	tag := res.Header.Get("ETag")
	if tag == "" || res.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("GET /ui/: ETag %q, Cache-Control %q", tag, res.Header.Get("Cache-Control"))
	}
	req := httptest.NewRequest(http.MethodGet, "/ui/", nil)
	req.Header.Set("If-None-Match", tag)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified {
		t.Errorf("GET /ui/ with its ETag: %d, want 304", rec.Code)
	}
	if res := get(t, h, http.MethodGet, "/ui/app.js"); res.Header.Get("ETag") == "" || res.Header.Get("ETag") == tag {
		t.Errorf("app.js has ETag %q, index.html %q", res.Header.Get("ETag"), tag)
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
		// The SVG namespace is a name, not an address anything is loaded
		// from.
		b = []byte(strings.ReplaceAll(string(b), `xmlns="http://www.w3.org/2000/svg"`, ""))
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

// The pages learn whether the API wants a token before their first call.
func TestSettingsSayWhetherATokenIsRequired(t *testing.T) {
	for _, required := range []bool{false, true} {
		res := get(t, Handler("/ui/", required), http.MethodGet, "/ui/settings.json")
		body, _ := io.ReadAll(res.Body)
		if want := fmt.Sprintf(`{"tokenRequired":%v}`, required); res.StatusCode != http.StatusOK || string(body) != want {
			t.Errorf("settings.json with a token required %v: %d %s, want %s", required, res.StatusCode, body, want)
		}
	}
}
