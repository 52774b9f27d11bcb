// Package console is the web console (DESIGN 13): static pages, embedded
// in the binary and served at /ui/ on the API port, that read and drive
// conduit through the same Connect API as the CLI (JSON over HTTP, the
// server stream for live events). Nothing is loaded from the network.
//
// The pages hold no data of their own: with api.auth.token set they ask
// for the token, keep it in the tab's session storage and send it as a
// bearer token with every call; nothing is shown until the API accepts
// it. No cookie is used, so another site cannot ride on a session.
package console

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed assets
var assets embed.FS

// Handler serves the console under prefix (which ends in a slash); the
// prefix without its slash redirects there. tokenRequired is told to the
// pages (settings.json), so that they ask for the token before their
// first call rather than after a refused one.
func Handler(prefix string, tokenRequired bool) http.Handler {
	files, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	tags, err := etags(files)
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	settings, _ := json.Marshal(struct {
		TokenRequired bool `json:"tokenRequired"`
	}{tokenRequired})
	static := http.StripPrefix(prefix, http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		// Only this origin's scripts, styles, images and API; never in a
		// frame.
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == strings.TrimSuffix(prefix, "/") {
			http.Redirect(w, r, prefix, http.StatusMovedPermanently)
			return
		}
		// Asked again every time, answered "not modified" while the
		// binary is the same.
		h.Set("Cache-Control", "no-cache")
		name := strings.TrimPrefix(r.URL.Path, prefix)
		if name == "settings.json" {
			h.Set("Content-Type", "application/json")
			_, _ = w.Write(settings)
			return
		}
		if name == "" {
			name = "index.html"
		}
		if tag, ok := tags[name]; ok {
			h.Set("ETag", tag)
		}
		static.ServeHTTP(w, r)
	})
}

// etags are the embedded files' entity tags: a digest of their content.
func etags(files fs.FS) (map[string]string, error) {
	tags := map[string]string{}
	err := fs.WalkDir(files, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(files, path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		tags[path] = `"` + hex.EncodeToString(sum[:12]) + `"`
		return nil
	})
	return tags, err
}
