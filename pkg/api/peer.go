package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
)

// Without api.auth.token the API answers only the OS user conduit runs as
// and root: loopback is not a trust boundary on a shared machine or in a
// pod whose containers share a network namespace, and the API can make
// conduit read and write files with its privileges. The client's user is
// that of its end of the TCP connection, which the kernel knows (Linux);
// it is looked up once per connection, on the first request that needs it.

// errPeerUnsupported: this system cannot tell which user holds the other
// end of a loopback connection.
var errPeerUnsupported = errors.New("this operating system does not tell which user holds a TCP connection")

// peerUsers finds the OS user (uid) holding the client end of a TCP
// connection from its two addresses, local being the server's end.
type peerUsers func(local, remote *net.TCPAddr) (uint32, error)

// peerConnKey is the context key of a connection's *peerConn.
type peerConnKey struct{}

// peerConn is what the API knows of one connection's client: its user
// once it is looked up, and whether it made a call the guard let through.
type peerConn struct {
	local, remote net.Addr
	once          sync.Once
	uid           uint32
	err           error
	// admitted: a call other than a health check passed the guard (its
	// token, or its user). At the connection cap a busy connection that
	// was never admitted may be closed to make room (connLimiter).
	admitted atomic.Bool
	// uploading counts the admitted requests of the connection whose
	// body has not been read to its end yet. Such a connection is closed
	// to make room as a never admitted one is: a client that sends a
	// request head and then trickles (or withholds) the body is not yet
	// making a call, and conduit's own user holding every connection that
	// way must not lock out health checks and calls.
	uploading atomic.Int32
}

// withPeerConn is the server's ConnContext: every request of a connection
// shares one lookup of its client's user.
func withPeerConn(ctx context.Context, c net.Conn) context.Context {
	pc := &peerConn{local: c.LocalAddr(), remote: c.RemoteAddr()}
	if lc, ok := c.(*limitedConn); ok {
		lc.peer = pc
	}
	return context.WithValue(ctx, peerConnKey{}, pc)
}

// markAdmitted records that r's connection made a call the guard let
// through. When r has a body, the connection counts as uploading until
// the body is read to its end (or fails, or is closed) or done is called,
// whichever comes first; the caller calls done when the handler returns.
// done is nil when there is nothing to wait for.
func markAdmitted(r *http.Request) (done func()) {
	pc, ok := r.Context().Value(peerConnKey{}).(*peerConn)
	if !ok {
		return nil
	}
	pc.admitted.Store(true)
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil
	}
	pc.uploading.Add(1)
	var once sync.Once
	done = func() { once.Do(func() { pc.uploading.Add(-1) }) }
	r.Body = &uploadBody{ReadCloser: r.Body, done: done}
	return done
}

// uploadBody calls done once its reader has nothing more to give.
type uploadBody struct {
	io.ReadCloser
	done func()
}

func (b *uploadBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.done()
	}
	return n, err
}

func (b *uploadBody) Close() error {
	b.done()
	return b.ReadCloser.Close()
}

// peerUID is the uid of the client that sent r. A server without
// withPeerConn (a test's httptest server) looks it up on every request
// from the addresses net/http puts in the request.
func peerUID(r *http.Request, lookup peerUsers) (uint32, error) {
	if pc, ok := r.Context().Value(peerConnKey{}).(*peerConn); ok {
		pc.once.Do(func() { pc.uid, pc.err = lookupAddrs(pc.local, pc.remote, lookup) })
		return pc.uid, pc.err
	}
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	remote, err := net.ResolveTCPAddr("tcp", r.RemoteAddr)
	if err != nil {
		return 0, fmt.Errorf("client address %q: %w", r.RemoteAddr, err)
	}
	return lookupAddrs(local, remote, lookup)
}

func lookupAddrs(local, remote net.Addr, lookup peerUsers) (uint32, error) {
	l, lok := local.(*net.TCPAddr)
	r, rok := remote.(*net.TCPAddr)
	if !lok || !rok {
		return 0, fmt.Errorf("the connection (%v to %v) is not a TCP connection", remote, local)
	}
	return lookup(l, r)
}

// ownUsers are the users that may call the API without a token: the one
// conduit runs as (its effective uid) and root.
type ownUsers struct{ uid uint32 }

func processUsers() ownUsers { return ownUsers{uid: uint32(os.Geteuid())} }

func (o ownUsers) allowed(uid uint32) bool { return uid == o.uid || uid == 0 }

// PeerUsersKnown reports whether this system lets the API tell which OS
// user a loopback client runs as. Where it does not, a loopback client is
// answered without a token whoever it runs as.
func PeerUsersKnown() bool { return peerUsersKnown }
