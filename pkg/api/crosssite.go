package api

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"

	"connectrpc.com/connect"
)

// A web page in the operator's own browser is an attacker too: the
// browser runs as conduit's own user on this machine, so the Host and
// user checks let its requests through, and a page of any site may send
// "simple" requests (a form, a no-cors fetch with a text/plain body, a
// WebSocket) to 127.0.0.1 without asking. The cross-site check refuses
// them on every route and transport, before anything reads a body:
//
//   - Origin (sent by browsers on every POST, CORS fetch and WebSocket)
//     must be the API's own origin - the scheme, host and port the
//     request was sent to - or one listed in
//     api.http.cors.allowed-origins. "null" (a sandboxed frame, a file:
//     page) is never the API's own. A page on 127.0.0.1 at another port
//     is same-site but another origin, and is refused.
//   - Without Origin, Sec-Fetch-Site cross-site or same-site is refused:
//     same-site does not say which port the page is on. Only a top-level
//     navigation to the console's pages passes (a link to the console);
//     the pages hold no data and do nothing by themselves.
//   - A request with any mark of a browser (Origin, a Sec-Fetch-*
//     header, a browser's User-Agent) whose body has a content type a
//     page may send without a preflight (none, text/plain,
//     application/x-www-form-urlencoded, multipart/form-data) is refused
//     on every route, whatever its origin: no route takes one from a
//     browser, and a browser too old to send Origin still sends its
//     User-Agent, which a page cannot change without a preflight. From
//     a browser, Conduit's /v1 routes demand application/json.
//
// Clients that are not browsers (the CLIs, curl, gRPC and Connect
// clients, scripts) send none of these and pass; a script's body on a
// /v1 route is read as JSON whatever its content type, as under Conduit,
// so `curl -d '{...}'` keeps working. Origins that are allowed get
// CORS headers and answers to their preflights; nothing else does.

// corsAllowHeaders are the request headers a page of an allowed origin
// may send: those of the JSON routes, Connect, gRPC-Web and the token.
const corsAllowHeaders = "Authorization, Content-Type, Accept, Connect-Protocol-Version, Connect-Timeout-Ms, Grpc-Timeout, X-Grpc-Web, X-User-Agent"

// corsExposeHeaders are the response headers such a page may read:
// gRPC-Web's status and the token challenge.
const corsExposeHeaders = "Grpc-Status, Grpc-Message, Grpc-Status-Details-Bin, Www-Authenticate"

// corsMaxAge is how long, in seconds, a browser may keep a preflight's
// answer.
const corsMaxAge = "600"

// allowedOriginsKey names the setting in refusals.
const allowedOriginsKey = "api.http.cors.allowed-origins"

// crossSite holds the origins allowed besides the API's own.
type crossSite struct {
	allowed map[string]bool
}

func newCrossSite(origins []string) crossSite {
	c := crossSite{allowed: map[string]bool{}}
	for _, o := range origins {
		if n, ok := normalizeOrigin(o); ok {
			c.allowed[n] = true
		}
	}
	return c
}

// check decides whether r may go on. allowedOrigin is the request's
// Origin when it is one of the allowed (not the API's own), so the caller
// adds CORS headers; err is the refusal.
func (c crossSite) check(r *http.Request) (allowedOrigin string, err error) {
	own := ownOrigin(r)
	if values, sent := r.Header["Origin"]; sent {
		origin := strings.Join(values, ",")
		n, ok := normalizeOrigin(origin)
		switch {
		case ok && n == own:
		case ok && c.allowed[n]:
			allowedOrigin = origin
		default:
			return "", connect.NewError(connect.CodePermissionDenied, fmt.Errorf(
				"cross-site request refused: Origin %q is not this API's origin (%s); a web page of another origin may not call the API unless %s lists its origin", origin, own, allowedOriginsKey))
		}
	} else if site := r.Header.Get("Sec-Fetch-Site"); (site == "cross-site" || site == "same-site") && !consoleNavigation(r) {
		return "", connect.NewError(connect.CodePermissionDenied, fmt.Errorf(
			"cross-site request refused: the browser says it comes from a page of another origin (Sec-Fetch-Site: %s) and sent no Origin; open the console at %s%s, or list the page's origin in %s", site, own, ConsolePath, allowedOriginsKey))
	}
	if err := checkBodyType(r); err != nil {
		return "", err
	}
	return allowedOrigin, nil
}

// consoleNavigation reports whether r is a top-level navigation to one of
// the console's pages (a link followed), which a browser sends without
// Origin.
func consoleNavigation(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && isConsolePath(r.URL.Path) &&
		r.Header.Get("Sec-Fetch-Mode") == "navigate" && r.Header.Get("Sec-Fetch-Dest") == "document"
}

// checkBodyType refuses a body a web page may send without a preflight.
// Conduit's /v1 routes read any body as JSON, so they demand
// application/json; every other route reads its own content types
// (Connect's, gRPC's), none of them one of these.
func checkBodyType(r *http.Request) error {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 || !fromBrowser(r) {
		return nil
	}
	ct := r.Header.Get("Content-Type")
	mediaType, _, err := mime.ParseMediaType(ct)
	if err != nil {
		mediaType = strings.ToLower(strings.TrimSpace(ct))
	}
	if isConduitV1HTTP(r.URL.Path) {
		if mediaType != "application/json" {
			return connect.NewError(connect.CodePermissionDenied, fmt.Errorf(
				"the body's Content-Type is %q: the /v1 routes take only application/json (send -H 'Content-Type: application/json'); a body of another type is what a web page can send to any site, so it is refused", ct))
		}
		return nil
	}
	switch mediaType {
	case "", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data":
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf(
			"the body's Content-Type is %q, which a web page can send to any site: no route of this API takes it (send application/json)", ct))
	}
	return nil
}

// fromBrowser reports whether r bears a mark of a web browser: an Origin
// or Sec-Fetch-* header (every current browser sends one or the other
// on a request a page makes), or a browser's User-Agent, which every
// browser sends and a page cannot set on a request sent without a
// preflight. curl, the CLIs and scripts send none of them.
func fromBrowser(r *http.Request) bool {
	h := r.Header
	if _, ok := h["Origin"]; ok {
		return true
	}
	for _, name := range []string{"Sec-Fetch-Site", "Sec-Fetch-Mode", "Sec-Fetch-Dest", "Sec-Fetch-User"} {
		if h.Get(name) != "" {
			return true
		}
	}
	return strings.HasPrefix(h.Get("User-Agent"), "Mozilla/")
}

// corsHeaders marks a response for an allowed origin: the browser lets
// the page read it.
func corsHeaders(h http.Header, origin string) {
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
	h.Add("Vary", "Origin")
}

// isPreflight reports whether r is a CORS preflight: the browser asks
// before a request a page may not send on its own.
func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
}

// answerPreflight tells the browser that an allowed origin may send the
// request it asked about.
func answerPreflight(w http.ResponseWriter, origin string) {
	h := w.Header()
	corsHeaders(h, origin)
	h.Add("Vary", "Access-Control-Request-Method")
	h.Add("Vary", "Access-Control-Request-Headers")
	h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE")
	h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
	h.Set("Access-Control-Max-Age", corsMaxAge)
	w.WriteHeader(http.StatusNoContent)
}

// ownOrigin is the origin the request was sent to, as a browser writes
// it: the scheme, the Host header (the :authority over HTTP/2) and the
// port unless it is the scheme's default.
func ownOrigin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if n, ok := normalizeOrigin(scheme + "://" + r.Host); ok {
		return n
	}
	return scheme + "://" + strings.ToLower(r.Host)
}

// normalizeOrigin writes an origin (scheme://host[:port], nothing more)
// in one form: lower case, without the scheme's default port. ok is false
// for anything else, "null" included.
func normalizeOrigin(origin string) (string, bool) {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", false
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port == "" {
		return scheme + "://" + host, true
	}
	return scheme + "://" + net.JoinHostPort(strings.Trim(host, "[]"), port), true
}
