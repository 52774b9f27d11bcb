package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The plugin protocol's environment (see proto/conduitry/connector/v1). The runtime
// sets both when it starts a connector executable.
const (
	// EnvSocket names the unix socket the plugin listens on. The runtime
	// puts it in a directory only its user can open.
	EnvSocket = "CONDUIT_PLUGIN_SOCKET"
	// EnvProtocol is the protocol version the runtime speaks, as decimal
	// text; Serve refuses any other than ProtocolVersion.
	EnvProtocol = "CONDUIT_PLUGIN_PROTOCOL"
	// ProtocolVersion is the plugin protocol version this SDK speaks.
	ProtocolVersion = 1
	// MaxMessageBytes is the largest message the runtime accepts from a
	// plugin. The SDK sends a batch that would be larger as several
	// messages; a single record larger than that fails the Read with a
	// fatal error naming its position.
	MaxMessageBytes = 64 << 20
)

// Exit statuses of a plugin process.
const (
	exitOK    = 0 // Teardown done, or asked to stop by a signal
	exitError = 1 // could not serve, or the runtime never came or went away
	exitUsage = 2 // not started by a runtime that speaks our protocol
)

// Timeouts of a plugin process.
const (
	// handshakeTimeout: a runtime connects right after starting the process;
	// one that has not after this long is gone, and the process must not
	// linger.
	handshakeTimeout = 60 * time.Second
	// shutdownTimeout bounds the graceful parts of stopping: flushing the
	// Teardown response, and the Teardown Serve calls itself on a signal.
	shutdownTimeout = 5 * time.Second
	// parentPollInterval: how often the process checks that the runtime
	// that started it still runs.
	parentPollInterval = time.Second
)

// Serve runs the plugin side of a standalone connector and never returns:
// call it from main and nothing else. It exits the process:
//
//   - with status 2 and an explanation on stderr when the process was not
//     started by a runtime (CONDUIT_PLUGIN_SOCKET and CONDUIT_PLUGIN_PROTOCOL
//     are missing, e.g. someone ran it by hand), when the runtime speaks
//     another protocol version than ProtocolVersion, or when p has no Name
//     or no constructor;
//   - with status 0 after Teardown (its response flushed first), and on
//     SIGTERM or SIGINT, after calling Teardown itself when the runtime did
//     not (bounded by a few seconds);
//   - with status 1 when it cannot listen on the socket, when no runtime
//     connects within 60s, or when the runtime that started it is gone (the
//     process was re-parented).
//
// While running, it listens on the unix socket CONDUIT_PLUGIN_SOCKET (a
// stale socket file is removed first; the socket gets mode 0600) and serves
// PluginService, SourceService and DestinationService of proto/conduitry/connector/v1
// with Connect, gRPC and gRPC-Web over HTTP/1.1 and cleartext HTTP/2. It
// runs one connector instance, built by Configure; any other call before a
// successful Configure gets a fatal error. Every error is sent as the wire
// JSON described in the package documentation.
func Serve(p Plugin) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	os.Exit(serve(p, serveOptions{
		getenv:           os.Getenv,
		stderr:           os.Stderr,
		signals:          sigs,
		parentGone:       watchParent(parentPollInterval),
		handshakeTimeout: handshakeTimeout,
		shutdownTimeout:  shutdownTimeout,
	}))
}

// serveOptions are Serve's dependencies on the process, injected so that
// tests run serve in-process.
type serveOptions struct {
	getenv func(string) string
	stderr io.Writer
	// signals delivers the signals that stop the process.
	signals <-chan os.Signal
	// parentGone is closed when the runtime that started the process is
	// gone; nil never is.
	parentGone       <-chan struct{}
	handshakeTimeout time.Duration
	shutdownTimeout  time.Duration
}

// serve is Serve without the exit: it returns the exit status.
func serve(p Plugin, o serveOptions) int {
	if p.Name == "" || (p.NewSource == nil && p.NewDestination == nil) {
		fmt.Fprintln(o.stderr, "sdk.Serve: the Plugin needs a Name and NewSource, NewDestination or both")
		return exitUsage
	}
	socket, proto := o.getenv(EnvSocket), o.getenv(EnvProtocol)
	switch {
	case socket == "" && proto == "":
		fmt.Fprint(o.stderr, usage(p))
		return exitUsage
	case proto != strconv.Itoa(ProtocolVersion):
		fmt.Fprintf(o.stderr, "%s: the runtime speaks plugin protocol %s=%q, this connector speaks %d; "+
			"use a connector built with an SDK for the runtime's protocol, or a runtime that speaks %d\n",
			p.Name, EnvProtocol, proto, ProtocolVersion, ProtocolVersion)
		return exitUsage
	case socket == "":
		fmt.Fprintf(o.stderr, "%s: %s is not set; the runtime sets it to the unix socket this connector listens on\n",
			p.Name, EnvSocket)
		return exitUsage
	}

	ln, err := listen(socket)
	if err != nil {
		fmt.Fprintf(o.stderr, "%s: %v\n", p.Name, err)
		return exitError
	}
	defer ln.Close() // also removes the socket file

	tornDown := make(chan struct{})
	var tornDownOnce sync.Once
	srv := newServer(p, o.stderr, func() { tornDownOnce.Do(func() { close(tornDown) }) })

	connected := make(chan struct{})
	var connectedOnce sync.Once
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	hs := &http.Server{
		Handler:           srv.handler(),
		Protocols:         protocols,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(o.stderr, p.Name+": http: ", 0),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				connectedOnce.Do(func() { close(connected) })
			}
		},
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()

	handshake := time.NewTimer(o.handshakeTimeout)
	defer handshake.Stop()
	waitConn := connected // nil once connected, so the select does not spin
	for {
		select {
		case <-waitConn:
			handshake.Stop()
			waitConn = nil
		case <-handshake.C:
			fmt.Fprintf(o.stderr, "%s: no runtime connected to %s within %s; exiting\n", p.Name, socket, o.handshakeTimeout)
			_ = hs.Close()
			return exitError
		case <-tornDown:
			stopServing(hs, o.shutdownTimeout)
			return exitOK
		case sig := <-o.signals:
			fmt.Fprintf(o.stderr, "%s: %v: stopping\n", p.Name, sig)
			abandon(srv, hs, o)
			return exitOK
		case <-o.parentGone:
			fmt.Fprintf(o.stderr, "%s: the runtime that started this process is gone; stopping\n", p.Name)
			abandon(srv, hs, o)
			return exitError
		case err := <-served:
			fmt.Fprintf(o.stderr, "%s: serving %s: %v\n", p.Name, socket, err)
			return exitError
		}
	}
}

// stopServing lets calls in progress (the Teardown response) finish, for
// at most timeout, then closes what is left.
func stopServing(hs *http.Server, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := hs.Shutdown(ctx); err != nil {
		_ = hs.Close()
	}
}

// abandon stops a process whose runtime will not call Teardown: it tears
// the connector down itself, so that it flushes and releases what it holds,
// but gives up after the shutdown timeout rather than hang.
func abandon(srv *server, hs *http.Server, o serveOptions) {
	ctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.teardown(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			fmt.Fprintf(o.stderr, "%s: teardown: %v\n", srv.plugin.Name, err)
		}
	case <-ctx.Done():
		fmt.Fprintf(o.stderr, "%s: teardown did not finish within %s\n", srv.plugin.Name, o.shutdownTimeout)
	}
	_ = hs.Close()
}

// listen listens on the unix socket at path, removing a stale socket file
// left by an earlier process, and restricts it to the owner.
func listen(path string) (net.Listener, error) {
	fi, err := os.Lstat(path)
	switch {
	case err == nil && fi.Mode()&fs.ModeSocket == 0:
		// Not ours to remove: a wrong path must not delete a user's file.
		return nil, fmt.Errorf("%s %s: the file exists and is not a socket", EnvSocket, path)
	case err == nil:
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("%s %s: remove stale socket: %w", EnvSocket, path, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%s %s: %w", EnvSocket, path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", EnvSocket, path, err)
	}
	// The directory already keeps others out; the mode is a second fence
	// for a runtime that put the socket somewhere less private.
	if err := os.Chmod(path, 0o600); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("%s %s: %w", EnvSocket, path, err)
	}
	return ln, nil
}

// watchParent returns a channel that is closed once the process's parent
// changes, i.e. the runtime that started it died and the process was
// re-parented. Without it, a plugin whose runtime crashed would hold its
// connections and files until someone killed it.
func watchParent(interval time.Duration) <-chan struct{} {
	gone := make(chan struct{})
	parent := os.Getppid()
	go func() {
		for os.Getppid() == parent {
			time.Sleep(interval)
		}
		close(gone)
	}()
	return gone
}

// usage explains to someone who ran the executable by hand what it is.
func usage(p Plugin) string {
	var roles string
	switch {
	case p.NewSource != nil && p.NewDestination != nil:
		roles = "a source and a destination"
	case p.NewSource != nil:
		roles = "a source"
	default:
		roles = "a destination"
	}
	name := p.Name
	if p.Version != "" {
		name += " " + p.Version
	}
	return wrap(fmt.Sprintf("%s is a conduit connector plugin (%s). It is not meant to be run by hand: "+
		"the conduit runtime starts it when a pipeline uses it, with %s and %s set, and talks to it over "+
		"that socket. To install it, put this executable into the directory that connectors.path in "+
		"conduit.yml names (./connectors by default) with the file name %q, and refer to it in a pipeline "+
		"file's plugin field as standalone:%s.", name, roles, EnvSocket, EnvProtocol, p.Name, p.Name), 78)
}

// wrap breaks text into lines of at most width columns at spaces.
func wrap(text string, width int) string {
	var b strings.Builder
	n := 0
	for i, w := range strings.Fields(text) {
		if i > 0 {
			if n+1+len(w) > width {
				b.WriteByte('\n')
				n = 0
			} else {
				b.WriteByte(' ')
				n++
			}
		}
		b.WriteString(w)
		n += len(w)
	}
	b.WriteByte('\n')
	return b.String()
}
