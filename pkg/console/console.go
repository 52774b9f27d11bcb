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
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed assets
var assets embed.FS

// Handler serves the console under prefix (which ends in a slash); the
// prefix without its slash redirects there.
func Handler(prefix string) http.Handler {
	files, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	static := http.StripPrefix(prefix, http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == strings.TrimSuffix(prefix, "/") {
			http.Redirect(w, r, prefix, http.StatusMovedPermanently)
			return
		}
		h := w.Header()
		// Only this origin's scripts, styles and API; never in a frame.
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-cache")
		static.ServeHTTP(w, r)
	})
}
