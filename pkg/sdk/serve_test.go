package sdk

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	connectorv1 "github.com/conduitry/conduit/pkg/api/gen/conduitry/connector/v1"
	"github.com/conduitry/conduit/pkg/api/gen/conduitry/connector/v1/connectorv1connect"
)

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// env returns a getenv over m.
func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// socketPath returns a socket path in a fresh directory. Unix socket paths
// are limited to about 100 bytes, so it is kept short.
func socketPath(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sdk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "p.sock")
}

// running is a serve call in a goroutine.
type running struct {
	exit   chan int
	stderr *syncBuffer
	sigs   chan os.Signal
	parent chan struct{}
}

func startServe(t *testing.T, p Plugin, socket string, handshake time.Duration) *running {
	t.Helper()
	r := &running{exit: make(chan int, 1), stderr: &syncBuffer{}, sigs: make(chan os.Signal, 1), parent: make(chan struct{})}
	opts := serveOptions{
		getenv:           env(map[string]string{EnvSocket: socket, EnvProtocol: "1"}),
		stderr:           r.stderr,
		signals:          r.sigs,
		parentGone:       r.parent,
		handshakeTimeout: handshake,
		shutdownTimeout:  5 * time.Second,
	}
	go func() { r.exit <- serve(p, opts) }()
	return r
}

// wait returns serve's exit status, failing the test if it does not come.
func (r *running) wait(t *testing.T) int {
	t.Helper()
	select {
	case code := <-r.exit:
		return code
	case <-time.After(10 * time.Second):
		t.Fatalf("serve did not return; stderr:\n%s", r.stderr)
		return -1
	}
}

// unixClient returns an HTTP client that reaches the socket with the given
// protocols, retrying the dial until serve listens.
func unixClient(socket string, h2c bool) *http.Client {
	protocols := new(http.Protocols)
	if h2c {
		protocols.SetUnencryptedHTTP2(true)
	} else {
		protocols.SetHTTP1(true)
	}
	return &http.Client{Transport: &http.Transport{
		Protocols: protocols,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			for {
				c, err := d.DialContext(ctx, "unix", socket)
				if err == nil || ctx.Err() != nil {
					return c, err
				}
				select {
				case <-ctx.Done():
				case <-time.After(5 * time.Millisecond):
				}
			}
		},
	}}
}

// TestServeUnixSocket runs a whole source lifecycle against serve on a
// real unix socket, over HTTP/1.1 and cleartext HTTP/2, as the runtime
// would, and checks the process would exit 0 after Teardown.
func TestServeUnixSocket(t *testing.T) {
	for _, h2c := range []bool{false, true} {
		name := "http1"
		if h2c {
			name = "h2c"
		}
		t.Run(name, func(t *testing.T) {
			socket := socketPath(t)
			// A socket file left by an earlier process is removed.
			stale, err := net.Listen("unix", socket)
			if err != nil {
				t.Fatal(err)
			}
			stale.(*net.UnixListener).SetUnlinkOnClose(false)
			stale.Close()

			src := &fakeSource{}
			r := startServe(t, sourcePlugin(src), socket, 10*time.Second)
			client := unixClient(socket, h2c)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()

			info := connectorv1connect.NewPluginServiceClient(client, "http://plugin")
			resp, err := info.Info(ctx, connect.NewRequest(&connectorv1.InfoRequest{}))
			if err != nil {
				t.Fatalf("Info: %v; stderr:\n%s", err, r.stderr)
			}
			if resp.Msg.GetProtocolVersion() != ProtocolVersion || !resp.Msg.GetSource() {
				t.Errorf("Info = %v", resp.Msg)
			}
			fi, err := os.Stat(socket)
			if err != nil {
				t.Fatal(err)
			}
			if mode := fi.Mode().Perm(); mode != 0o600 {
				t.Errorf("socket mode %v, want 0600", mode)
			}

			sc := connectorv1connect.NewSourceServiceClient(client, "http://plugin")
			if _, err := sc.Configure(ctx, connect.NewRequest(&connectorv1.SourceServiceConfigureRequest{
				Config: &connectorv1.ConnectorConfig{ConnectorId: "c1"},
			})); err != nil {
				t.Fatal(err)
			}
			if _, err := sc.Open(ctx, connect.NewRequest(&connectorv1.SourceServiceOpenRequest{})); err != nil {
				t.Fatal(err)
			}
			read, err := sc.Read(ctx, connect.NewRequest(&connectorv1.ReadRequest{MaxRecords: 10}))
			if err != nil {
				t.Fatal(err)
			}
			if read.Msg.GetBatch().GetCount() != 1 {
				t.Errorf("Read returned %d records, want 1", read.Msg.GetBatch().GetCount())
			}
			// A coded error crosses the socket as the wire JSON.
			src.mu.Lock()
			src.errs = map[string]error{"Ack": WithCode(errors.New("gone"), CodeNotFound)}
			src.mu.Unlock()
			_, err = sc.Ack(ctx, connect.NewRequest(&connectorv1.AckRequest{Positions: [][]byte{[]byte("1")}}))
			if _, msg := wire(t, err); msg != `{"code":404,"message":"gone"}` {
				t.Errorf("Ack error %q", msg)
			}

			start := time.Now()
			if _, err := sc.Teardown(ctx, connect.NewRequest(&connectorv1.SourceServiceTeardownRequest{})); err != nil {
				t.Fatalf("Teardown: %v", err)
			}
			if code := r.wait(t); code != exitOK {
				t.Errorf("exit %d, want 0; stderr:\n%s", code, r.stderr)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("serve took %s to stop after Teardown", d)
			}
			if _, err := os.Lstat(socket); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("socket file left behind: %v", err)
			}
		})
	}
}

// Before serving, serve checks that a runtime speaking our protocol
// started it, and explains itself to a person who ran it by hand.
func TestServeEnvironment(t *testing.T) {
	plugin := sourcePlugin(&fakeSource{})
	tests := []struct {
		name   string
		plugin Plugin
		env    map[string]string
		want   []string
	}{
		{"run by hand", plugin, nil, []string{
			"fake v1.2.3 is a conduit connector plugin (a source)", "It is not meant to be",
			"connectors.path", "standalone:fake.",
		}},
		{"protocol mismatch", plugin, map[string]string{EnvSocket: "/x", EnvProtocol: "2"}, []string{
			`CONDUIT_PLUGIN_PROTOCOL="2"`, "this connector speaks 1",
		}},
		{"protocol missing", plugin, map[string]string{EnvSocket: "/x"}, []string{`CONDUIT_PLUGIN_PROTOCOL=""`}},
		{"socket missing", plugin, map[string]string{EnvProtocol: "1"}, []string{"CONDUIT_PLUGIN_SOCKET is not set"}},
		{"no name", Plugin{NewSource: plugin.NewSource}, nil, []string{"needs a Name"}},
		{"no constructor", Plugin{Name: "x"}, nil, []string{"NewSource, NewDestination or both"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := serve(tt.plugin, serveOptions{getenv: env(tt.env), stderr: &stderr})
			if code != exitUsage {
				t.Errorf("exit %d, want 2", code)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr does not say %q:\n%s", w, stderr.String())
				}
			}
		})
	}
}

// A path that is not a socket is not deleted: it is somebody's file.
func TestServeRefusesNonSocket(t *testing.T) {
	socket := socketPath(t)
	if err := os.WriteFile(socket, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startServe(t, sourcePlugin(&fakeSource{}), socket, time.Second)
	if code := r.wait(t); code != exitError {
		t.Errorf("exit %d, want 1", code)
	}
	if !strings.Contains(r.stderr.String(), "exists and is not a socket") {
		t.Errorf("stderr: %s", r.stderr)
	}
	if b, _ := os.ReadFile(socket); string(b) != "keep me" {
		t.Error("the file was changed")
	}
}

// A runtime that never connects does not leave the process behind.
func TestServeHandshakeTimeout(t *testing.T) {
	r := startServe(t, sourcePlugin(&fakeSource{}), socketPath(t), 20*time.Millisecond)
	if code := r.wait(t); code != exitError {
		t.Errorf("exit %d, want 1", code)
	}
	if !strings.Contains(r.stderr.String(), "no runtime connected") {
		t.Errorf("stderr: %s", r.stderr)
	}
}

// On SIGTERM, and when the runtime is gone, serve tears the connector down
// itself (it flushes what it holds) and exits.
func TestServeStopsWithoutTeardownCall(t *testing.T) {
	tests := []struct {
		name     string
		stop     func(r *running)
		wantExit int
		wantLog  string
	}{
		{"SIGTERM", func(r *running) { r.sigs <- syscall.SIGTERM }, exitOK, "terminated: stopping"},
		{"runtime gone", func(r *running) { close(r.parent) }, exitError, "the runtime that started this process is gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			socket := socketPath(t)
			src := &fakeSource{}
			r := startServe(t, sourcePlugin(src), socket, 10*time.Second)
			sc := connectorv1connect.NewSourceServiceClient(unixClient(socket, true), "http://plugin")
			if _, err := sc.Configure(context.Background(), connect.NewRequest(&connectorv1.SourceServiceConfigureRequest{})); err != nil {
				t.Fatal(err)
			}
			tt.stop(r)
			if code := r.wait(t); code != tt.wantExit {
				t.Errorf("exit %d, want %d", code, tt.wantExit)
			}
			if calls := src.Calls(); calls[len(calls)-1] != "Teardown" {
				t.Errorf("calls %v, want Teardown last", calls)
			}
			if !strings.Contains(r.stderr.String(), tt.wantLog) {
				t.Errorf("stderr does not say %q: %s", tt.wantLog, r.stderr)
			}
		})
	}
}

func TestWrap(t *testing.T) {
	got := wrap("aaa bbb ccc dddd e", 7)
	if want := "aaa bbb\nccc\ndddd e\n"; got != want {
		t.Errorf("wrap = %q, want %q", got, want)
	}
}
