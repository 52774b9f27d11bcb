package api

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// connLimiter caps the connections served at once, so that clients cannot
// take the descriptors the store and the pipelines need.
//
// A connection that arrives at the cap takes the place of the one that
// has gone longest without a request in flight: idle between requests,
// or new and not yet sending one. Clients holding idle keep-alive
// connections therefore cannot lock out a health probe or an API call;
// an HTTP client whose idle connection was closed opens a new one. When
// every connection has a request in flight, the one busy longest among
// those that never made a call the guard let through (only health checks
// or refused calls: a client trickling a request body holds its
// connection for the read timeout) makes room. Only when every
// connection is an admitted client's with a request in flight (calls,
// watch streams) does the new one wait for one to end. A connection whose
// admitted request has not yet delivered its whole body counts as never
// admitted: conduit's own user holding every connection with unfinished
// uploads must not lock out a health probe.
type connLimiter struct {
	net.Listener
	max int
	now func() time.Time

	mu    sync.Mutex
	conns map[*limitedConn]struct{}
	// freed gets a value when a connection is closed.
	freed chan struct{}
	done  chan struct{}
	close sync.Once
}

func newConnLimiter(ln net.Listener, maxConns int, now func() time.Time) *connLimiter {
	return &connLimiter{Listener: ln, max: maxConns, now: now,
		conns: map[*limitedConn]struct{}{}, freed: make(chan struct{}, 1), done: make(chan struct{})}
}

// limitedConn is a connection counted by a connLimiter.
type limitedConn struct {
	net.Conn
	l    *connLimiter
	once sync.Once
	// busy and since are guarded by l.mu: whether a request is in flight,
	// and since when the connection has had none.
	busy  bool
	since time.Time
	// peer is set by the server's ConnContext before the connection's
	// first request; nil until then.
	peer *peerConn
}

// Accept takes the next connection and makes room for it. While it waits
// for room, nothing else is accepted: further clients wait in the
// kernel's queue, holding no descriptor of the process.
func (l *connLimiter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	for {
		l.mu.Lock()
		if len(l.conns) < l.max {
			lc := &limitedConn{Conn: c, l: l, since: l.now()}
			l.conns[lc] = struct{}{}
			l.mu.Unlock()
			return lc, nil
		}
		victim := l.longestWaiting()
		l.mu.Unlock()
		if victim != nil {
			_ = victim.Close()
			continue
		}
		select {
		case <-l.freed:
		case <-l.done:
			_ = c.Close()
			return nil, net.ErrClosed
		}
	}
}

// longestWaiting is the connection to close to make room: the one
// without a request in flight that has been so longest, else the one of
// a never admitted client (or one still sending a request's body) busy
// longest; nil when every connection is an
// admitted client's with a request in flight. Called with l.mu held.
func (l *connLimiter) longestWaiting() *limitedConn {
	var idle, unadmitted *limitedConn
	for c := range l.conns {
		switch {
		case !c.busy:
			if idle == nil || c.since.Before(idle.since) {
				idle = c
			}
		case c.peer == nil || !c.peer.admitted.Load() || c.peer.uploading.Load() > 0:
			if unadmitted == nil || c.since.Before(unadmitted.since) {
				unadmitted = c
			}
		}
	}
	if idle != nil {
		return idle
	}
	return unadmitted
}

// Close stops Accept, also one waiting for room.
func (l *connLimiter) Close() error {
	l.close.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// connState is the server's ConnState hook: it tells the limiter which
// connections have a request in flight.
func (l *connLimiter) connState(c net.Conn, state http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch state {
	case http.StateNew, http.StateIdle:
		lc.busy, lc.since = false, l.now()
	case http.StateActive, http.StateHijacked:
		// A hijacked connection belongs to its handler until it closes.
		if !lc.busy {
			lc.busy, lc.since = true, l.now()
		}
	case http.StateClosed:
	}
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
		select {
		case c.l.freed <- struct{}{}:
		default:
		}
	})
	return err
}
