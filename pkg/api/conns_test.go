package api

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/pkg/clocktest"
)

// idleHealthConn is a keep-alive connection that made one GET /healthz
// and now holds its slot doing nothing.
func idleHealthConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	c := dial(t, addr)
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return c
}

// waitNoneBusy waits until the limiter sees no connection with a request
// in flight.
func waitNoneBusy(t *testing.T, l *connLimiter) {
	t.Helper()
	busy := 0
	clocktest.Eventually(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		busy = 0
		for c := range l.conns {
			if c.busy {
				busy++
			}
		}
		return busy == 0
	}, func() string { return fmt.Sprintf("%d connections still have a request in flight", busy) })
}

// answered makes a request on a new connection and returns its status.
func answered(t *testing.T, url, method, path, body string) int {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// Idle keep-alive connections at the cap do not lock out a probe or a
// call: the longest idle one makes room.
func TestIdleConnectionsMakeRoom(t *testing.T) {
	ts := startServerWith(t, Options{Health: okHealth{}}, ServerOptions{MaxConnections: 3})
	var idle []net.Conn
	for range 6 { // twice the cap
		idle = append(idle, idleHealthConn(t, ts.addr))
		// The client has its answer before the server marks the
		// connection idle; wait for that, so that the order in which
		// they went idle is the order they were made in.
		waitNoneBusy(t, ts.srv.ln.(*connLimiter))
	}
	if code := answered(t, ts.url, "GET", "/healthz", ""); code != http.StatusOK {
		t.Fatalf("/healthz with the cap held by idle connections: %d", code)
	}
	if code := answered(t, ts.url, "POST", "/conduit.v1.PipelineService/ListPipelines", "{}"); code != http.StatusOK {
		t.Fatalf("ListPipelines with the cap held by idle connections: %d", code)
	}
	// At most three connections were open at once, so at least three of
	// the six idle ones made room (closed before their successors were
	// served); the newest is still served on.
	closed := 0
	for _, c := range idle {
		_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		var one [1]byte
		if _, err := c.Read(one[:]); err != nil && !isTimeout(err) {
			closed++
		}
	}
	if closed < 3 {
		t.Fatalf("%d of 6 idle connections were closed with a cap of 3", closed)
	}
	last := idle[len(idle)-1]
	_ = last.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(last, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.ReadResponse(bufio.NewReader(last), nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the newest idle connection was closed: %v", err)
	}
}

// A client that sends a request's headers and trickles its body holds its
// connection busy for the read timeout; a client that never made a call
// the guard let through (here: health checks only) gives its place up.
func TestUnadmittedBusyConnectionsMakeRoom(t *testing.T) {
	ts := startServerWith(t, Options{Health: okHealth{}}, ServerOptions{MaxConnections: 2})
	var busy []net.Conn
	for range 2 {
		c := dial(t, ts.addr)
		// A health check whose body never comes: the handler waits for it.
		if _, err := io.WriteString(c, "POST /grpc.health.v1.Health/Check HTTP/1.1\r\nHost: localhost\r\n"+
			"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"); err != nil {
			t.Fatal(err)
		}
		busy = append(busy, c)
	}
	if code := answered(t, ts.url, "GET", "/healthz", ""); code != http.StatusOK {
		t.Fatalf("/healthz with the cap held by trickling clients: %d", code)
	}
	// One of them made room (closed before /healthz was served).
	closed := 0
	for _, c := range busy {
		_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		// Closed: an end of file, or a reset (the server had not read all
		// that was sent).
		if _, err := io.Copy(io.Discard, c); !isTimeout(err) {
			closed++
		}
	}
	if closed != 1 {
		t.Fatalf("%d of 2 trickling connections were closed to make room for one, want 1", closed)
	}
}

// Conduit's own user (a client the guard admits) holding every
// connection with uploads it never finishes does not lock out a health
// probe: a call whose body has not arrived is not yet a call, and its
// connection makes room as a never admitted one does. A call whose body
// has arrived is kept (TestAdmittedBusyConnectionsAreKept).
func TestUnfinishedUploadsMakeRoom(t *testing.T) {
	ts := startServerWith(t, Options{Health: okHealth{}}, ServerOptions{MaxConnections: 3})
	var uploads []net.Conn
	for _, path := range []string{"/conduit.v1.PipelineService/StopPipeline", "/v1/pipelines", "/conduit.v1.PipelineService/ListPipelines"} {
		c := dial(t, ts.addr)
		if _, err := io.WriteString(c, "POST "+path+" HTTP/1.1\r\nHost: localhost\r\n"+
			"Content-Type: application/json\r\nContent-Length: 900000\r\n\r\n{"); err != nil {
			t.Fatal(err)
		}
		uploads = append(uploads, c)
	}
	// The guard has let all three through: their handlers wait for the
	// bodies.
	l := ts.srv.ln.(*connLimiter)
	admitted := 0
	clocktest.Eventually(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		admitted = 0
		for c := range l.conns {
			if c.busy && c.peer != nil && c.peer.admitted.Load() {
				admitted++
			}
		}
		return admitted == 3
	}, func() string { return fmt.Sprintf("%d of 3 uploads were admitted", admitted) })
	for range 2 {
		if code := answered(t, ts.url, "GET", "/healthz", ""); code != http.StatusOK {
			t.Fatalf("/healthz with the cap held by unfinished uploads: %d", code)
		}
	}
	if code := answered(t, ts.url, "POST", "/conduit.v1.PipelineService/ListPipelines", "{}"); code != http.StatusOK {
		t.Fatalf("a call with the cap held by unfinished uploads: %d", code)
	}
	closed := 0
	for _, c := range uploads {
		_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := io.Copy(io.Discard, c); !isTimeout(err) {
			closed++
		}
	}
	if closed == 0 {
		t.Fatal("no unfinished upload made room")
	}
}

// Connections of admitted clients with a request in flight (watch
// streams) are never closed to make room: a connection beyond them waits
// in the kernel's queue until one ends.
func TestAdmittedBusyConnectionsAreKept(t *testing.T) {
	ts := startServerWith(t, Options{Health: okHealth{}}, ServerOptions{MaxConnections: 2})
	// The watch answers once it has an event to send.
	if _, err := ts.log.Append(context.Background(), auditlog.Event{PipelineID: "orders", Kind: auditlog.KindRunning}); err != nil {
		t.Fatal(err)
	}
	watches := []net.Conn{dial(t, ts.addr), dial(t, ts.addr)}
	for _, c := range watches {
		startRawWatch(t, c, `{"pipelineId":"orders"}`)
	}
	extra := dial(t, ts.addr)
	if _, err := io.WriteString(extra, healthRequest); err != nil {
		t.Fatal(err)
	}
	// Waiting for something not to happen needs a bound.
	_ = extra.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	var one [1]byte
	if n, err := extra.Read(one[:]); n > 0 || !isTimeout(err) {
		t.Fatalf("a connection beyond two watch streams was served: %d bytes, %v", n, err)
	}
	for _, c := range watches {
		_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := c.Read(one[:]); err != nil && !isTimeout(err) {
			t.Fatalf("a watch stream was closed to make room: %v", err)
		}
	}
	_ = watches[0].Close()
	_ = extra.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(extra), nil)
	if err != nil {
		t.Fatalf("the waiting connection once a watch ended: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
}
