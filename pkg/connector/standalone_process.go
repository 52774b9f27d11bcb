package connector

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/zap"

	cerrors "github.com/conduitry/conduit/errors"
	connectorv1 "github.com/conduitry/conduit/pkg/api/gen/conduitry/connector/v1"
	"github.com/conduitry/conduit/pkg/api/gen/conduitry/connector/v1/connectorv1connect"
	"github.com/conduitry/conduit/pkg/conduitplugin"
)

// The plugin protocol's environment (proto/conduitry/connector/v1/connector.proto).
const (
	envPluginSocket   = "CONDUIT_PLUGIN_SOCKET"
	envPluginProtocol = "CONDUIT_PLUGIN_PROTOCOL"
	protocolVersion   = 1
	// envPrefix starts the names of the runtime's own variables, none of
	// which a plugin inherits.
	envPrefix = "CONDUIT_"
)

const (
	// stderrTailLines is how many of the last stderr lines an error quotes.
	stderrTailLines = 20
	// maxQuotedLine bounds one quoted stderr line.
	maxQuotedLine = 500
	// exitWait is how long a failed call waits for the process to exit
	// before it is reported as a call failure rather than as an exit: a
	// dying process closes its connections a moment before it is reaped.
	exitWait = time.Second
	// outputWait is how long the output readers get to reach the end of
	// the process's output once it exited; a child process the plugin
	// started may hold the pipes open.
	outputWait = time.Second
	// baseURL is the URL of the plugin; the transport ignores the host and
	// dials the socket.
	baseURL = "http://plugin"
)

// pluginProcess is the process of one standalone connector instance: the
// executable, its private directory and socket, its output, the HTTP client
// that talks to it, and the goroutines that wait for its exit and read its
// output. start begins it; close (from the connector's Teardown) ends all
// of it.
type pluginProcess struct {
	host *StandaloneHost
	name string
	role connectorRole
	cfg  Config
	log  *zap.Logger

	// version is the version the reference asks for ("" for the latest);
	// it chooses among Conduit connectors of the name.
	version string

	// Set by start, read-only afterwards until close.
	path      string // the executable, when found by its Conduit name
	dir       string // private directory holding the socket; "" when none
	cmd       *exec.Cmd
	exited    chan struct{} // closed once cmd.Wait returned
	outputs   []*os.File    // read ends of stdout and stderr
	outDone   []chan struct{}
	stderr    lineRing
	transport *http.Transport
	client    *http.Client
	// token is the connector token of Conduit's protocol, utilities
	// stops the connector utilities service.
	token     string
	utilities func()
	// conduitLine carries the handshake line of Conduit's protocol from
	// the stdout reader to the handshake; conduit is the client attached
	// to such a plugin (nil for a plugin of pkg/sdk).
	conduitLine chan string
	conduit     *conduitPlugin
	// ready: the handshake succeeded, so the plugin may get calls.
	ready bool
	// stopped: the process was stopped and everything cleaned up.
	stopped bool
}

func newPluginProcess(h *StandaloneHost, name string, role connectorRole, cfg Config) *pluginProcess {
	return &pluginProcess{host: h, name: name, role: role, cfg: cfg, log: loggerOf(cfg)}
}

// executable is the absolute path of the plugin's file: the one resolve
// found, else the file of the plugin's name.
func (p *pluginProcess) executable() string {
	if p.path != "" {
		return p.path
	}
	path := filepath.Join(p.host.cfg.Dir, p.name)
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// resolve finds the plugin's executable: the file of its name in
// connectors.path, else the executable there whose Conduit specification
// has its name.
func (p *pluginProcess) resolve(ctx context.Context) (string, error) {
	path := p.executable()
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return path, p.checkExecutable(path)
	}
	found, silent, ferr := p.host.findByConduitName(ctx, p.name, p.version)
	switch {
	case ferr != nil && ctx.Err() != nil:
		// Stopped while looking: not the connector's fault.
		return "", fmt.Errorf("standalone connector %q: %w", p.name, ferr)
	case ferr != nil:
		return "", cerrors.Fatal(fmt.Errorf("standalone connector %q: %w", p.name, ferr))
	case found == "" && len(silent) > 0:
		return "", cerrors.Fatal(fmt.Errorf("standalone connector %q: executable %s not found, and no executable in connectors.path (%s) is a Conduit connector named %q; "+
			"not answering `<executable> specs` within %s, so killed (a connector of Conduit's SDK prints its specification at once; fix or remove it): %s",
			p.name, path, p.host.cfg.Dir, p.name, p.host.specProbeTimeout(), strings.Join(silent, ", ")))
	case found == "":
		return "", cerrors.Fatal(fmt.Errorf("standalone connector %q: executable %s not found, and no executable in connectors.path (%s) is a Conduit connector named %q",
			p.name, path, p.host.cfg.Dir, p.name))
	}
	if len(silent) > 0 {
		p.log.Warn("executables in connectors.path did not print a specification in time and were killed",
			zap.Strings("executables", silent), zap.Duration("timeout", p.host.specProbeTimeout()))
	}
	if err := p.checkExecutable(found); err != nil {
		return "", err
	}
	p.path = found
	p.log.Info("standalone connector found by its Conduit specification name", zap.String("executable", found))
	return found, nil
}

// start starts the process and completes the handshake. On failure nothing
// is left running.
func (p *pluginProcess) start(ctx context.Context) (err error) {
	if p.cmd != nil || p.stopped {
		return fmt.Errorf("standalone connector %q: open called twice or after teardown", p.name)
	}
	path, err := p.resolve(ctx)
	if err != nil {
		return err
	}
	if err := p.makeDir(); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			p.stop(0)
		}
	}()
	p.token = newToken()
	if err := p.serveUtilities(); err != nil {
		return err
	}
	socket := filepath.Join(p.dir, "plugin.sock")
	if err := p.launch(path, socket); err != nil {
		return err
	}
	p.log.Debug("standalone connector started", zap.String("executable", path), zap.Int("pid", p.cmd.Process.Pid))

	p.transport = &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		DisableCompression:  true,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     time.Minute,
	}
	p.client = &http.Client{Transport: p.transport}
	info, conduitLine, err := p.handshake(ctx)
	if err != nil {
		return err
	}
	if conduitLine != "" {
		if err := p.attachConduit(conduitLine); err != nil {
			return err
		}
		p.ready = true
		p.log.Info("standalone connector ready (Conduit's connector protocol)", zap.Int("pid", p.cmd.Process.Pid))
		return nil
	}
	if err := p.checkInfo(info); err != nil {
		return err
	}
	p.ready = true
	p.log.Info("standalone connector ready",
		zap.String("plugin_name", info.GetName()),
		zap.String("plugin_version", info.GetVersion()),
		zap.Int("pid", p.cmd.Process.Pid))
	return nil
}

func (p *pluginProcess) checkExecutable(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return cerrors.Fatal(fmt.Errorf("standalone connector %q: executable %s not found (connectors.path is %s)",
			p.name, path, p.host.cfg.Dir))
	case err != nil:
		return cerrors.Fatal(fmt.Errorf("standalone connector %q: executable %s: %w (connectors.path is %s)",
			p.name, path, err, p.host.cfg.Dir))
	case fi.IsDir() || fi.Mode().Perm()&0o111 == 0:
		return cerrors.Fatal(fmt.Errorf("standalone connector %q: executable %s is not executable (connectors.path is %s)",
			p.name, path, p.host.cfg.Dir))
	}
	return nil
}

// makeDir creates the private directory for the socket. A unix socket path
// is limited to about 100 bytes, so a long TMPDIR falls back to /tmp.
func (p *pluginProcess) makeDir() error {
	dir, err := os.MkdirTemp("", "conduit-plugin-")
	if err == nil && len(dir) > 80 {
		if short, err2 := os.MkdirTemp("/tmp", "conduit-plugin-"); err2 == nil {
			_ = os.Remove(dir)
			dir = short
		}
	}
	if err == nil {
		// MkdirTemp already uses 0700; say it here too, as it is what keeps
		// other users away from the socket.
		err = os.Chmod(dir, 0o700)
	}
	if err != nil {
		if dir != "" {
			_ = os.RemoveAll(dir)
		}
		return cerrors.Transient(fmt.Errorf("standalone connector %q: creating the directory for its socket: %w", p.name, err))
	}
	p.dir = dir
	return nil
}

// launch starts the executable with its output piped to the logger and a
// goroutine waiting for its exit.
func (p *pluginProcess) launch(path, socket string) error {
	var parentEnds, readEnds []*os.File
	closeAll := func(files []*os.File) {
		for _, f := range files {
			_ = f.Close()
		}
	}
	for range 2 {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(parentEnds)
			closeAll(readEnds)
			return cerrors.Transient(fmt.Errorf("standalone connector %q: creating a pipe: %w", p.name, err))
		}
		readEnds, parentEnds = append(readEnds, r), append(parentEnds, w)
	}
	// Not exec.CommandContext: the process lives until Teardown, not until
	// the end of Open's context.
	cmd := exec.Command(path)
	cmd.Env = append(pluginEnv(os.Environ(), socket), p.conduitEnv()...)
	cmd.Stdout, cmd.Stderr = parentEnds[0], parentEnds[1]
	setProcessGroup(cmd)
	err := cmd.Start()
	closeAll(parentEnds) // the child has its copies
	if err != nil {
		closeAll(readEnds)
		if errors.Is(err, fs.ErrPermission) {
			return cerrors.Fatal(fmt.Errorf("standalone connector %q: executable %s is not executable (connectors.path is %s): %w",
				p.name, path, p.host.cfg.Dir, err))
		}
		return cerrors.Fatal(fmt.Errorf("standalone connector %q: starting %s: %w", p.name, path, err))
	}
	p.cmd = cmd
	p.exited = make(chan struct{})
	go func() {
		_ = cmd.Wait() // the state is in cmd.ProcessState
		close(p.exited)
	}()
	p.outputs = readEnds
	p.conduitLine = make(chan string, 1)
	for i, stream := range []string{"stdout", "stderr"} {
		done := make(chan struct{})
		p.outDone = append(p.outDone, done)
		var ring *lineRing
		if stream == "stderr" {
			ring = &p.stderr
		}
		go p.pump(readEnds[i], stream, ring, done)
	}
	return nil
}

// pluginEnv is the plugin's environment: the runtime's, without any
// CONDUIT_ variable, plus the plugin protocol's own. The runtime's
// CONDUIT_ variables are its configuration and may be secrets (the API
// token is CONDUIT_API_AUTH_TOKEN); a plugin gets its settings through
// Configure. Everything else (PATH, HOME, proxies, locale) is kept.
func pluginEnv(environ []string, socket string) []string {
	env := make([]string, 0, len(environ)+2)
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		// Any case: a variable the runtime does not read may still be
		// meant for it, and whether the name is matched exactly depends on
		// the system.
		if len(name) >= len(envPrefix) && strings.EqualFold(name[:len(envPrefix)], envPrefix) {
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		envPluginSocket+"="+socket,
		fmt.Sprintf("%s=%d", envPluginProtocol, protocolVersion))
}

// pump logs the lines of one output stream of the process until it ends.
// A line longer than the buffer is logged in pieces rather than blocking
// the plugin.
func (p *pluginProcess) pump(r *os.File, stream string, ring *lineRing, done chan<- struct{}) {
	defer close(done)
	log := p.log.With(zap.String("stream", stream))
	br := bufio.NewReaderSize(r, 16<<10)
	first := stream == "stdout"
	for {
		line, err := br.ReadSlice('\n')
		if s := strings.TrimRight(string(line), "\r\n"); s != "" {
			if first {
				first = false
				if _, _, ok := conduitHandshake(s); ok {
					p.conduitLine <- s // the only send; the channel has room
					continue
				}
			}
			conduitplugin.LogLine(log, []byte(s))
			if ring != nil {
				ring.add(s)
			}
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// handshake calls PluginService.Info until it answers, the process exits,
// or the start timeout passes.
//
// A plugin of Conduit's protocol answers with a line on stdout instead;
// that line is returned, and info is nil.
func (p *pluginProcess) handshake(ctx context.Context) (info *connectorv1.InfoResponse, conduitLine string, err error) {
	timeout := p.host.cfg.StartTimeout
	deadline := time.Now().Add(timeout)
	expired := time.NewTimer(timeout)
	defer expired.Stop()
	poll := time.NewTimer(time.Hour) // reset before every wait
	defer poll.Stop()
	client := connectorv1connect.NewPluginServiceClient(p.client, baseURL, p.clientOptions()...)
	interval := 5 * time.Millisecond
	for {
		callCtx, cancel := context.WithDeadline(ctx, deadline)
		resp, err := client.Info(callCtx, connect.NewRequest(&connectorv1.InfoRequest{}))
		cancel()
		select {
		case line := <-p.conduitLine:
			return nil, line, nil
		default:
		}
		if err == nil {
			return resp.Msg, "", nil
		}
		if connect.IsWireError(err) {
			return nil, "", cerrors.Fatal(fmt.Errorf("standalone connector %q: handshake failed: %s", p.name, wireMessage(err)))
		}
		select {
		case <-p.exited:
			return nil, "", cerrors.Fatal(fmt.Errorf("standalone connector %q: executable %s exited before the handshake: %s%s",
				p.name, p.executable(), p.exitStatus(), p.stderrTail()))
		default:
		}
		poll.Reset(interval)
		interval = min(2*interval, 100*time.Millisecond)
		select {
		case <-ctx.Done():
			return nil, "", fmt.Errorf("standalone connector %q: handshake: %w", p.name, ctx.Err())
		case line := <-p.conduitLine:
			return nil, line, nil
		case <-p.exited:
			// Checked first thing in the next round.
		case <-expired.C:
			return nil, "", cerrors.Fatal(fmt.Errorf("standalone connector %q: executable %s did not answer the handshake within %s (connectors.start-timeout)%s",
				p.name, p.executable(), timeout, p.stderrTail()))
		case <-poll.C:
		}
	}
}

func (p *pluginProcess) checkInfo(info *connectorv1.InfoResponse) error {
	if v := info.GetProtocolVersion(); v != protocolVersion {
		return cerrors.Fatal(fmt.Errorf("standalone connector %q: executable %s speaks plugin protocol version %d; this runtime speaks version %d",
			p.name, p.executable(), v, protocolVersion))
	}
	can, role := info.GetSource(), "source"
	if p.role == roleDestination {
		can, role = info.GetDestination(), "destination"
	}
	if !can {
		return cerrors.Fatal(fmt.Errorf("standalone connector %q: plugin %s %s cannot be a %s",
			p.name, info.GetName(), info.GetVersion(), role))
	}
	return nil
}

// connectorConfig is what Configure sends.
func (p *pluginProcess) connectorConfig() *connectorv1.ConnectorConfig {
	return &connectorv1.ConnectorConfig{
		PipelineId:  p.cfg.PipelineID,
		ConnectorId: p.cfg.ConnectorID,
		Settings:    p.cfg.Settings,
	}
}

// clientOptions are the Connect client options for every service.
//
// Compression is off: over a local socket it only costs CPU, and a
// compressed message is a bomb waiting to happen (connect stops a
// decompressed message at the read limit, but decompresses the rest of it
// to count its size). Without gzip in the client's list, a plugin that
// compresses anyway gets an "unknown encoding" error, and nothing is
// decompressed. Every message is bounded by the host's MaxMessageBytes.
func (p *pluginProcess) clientOptions() []connect.ClientOption {
	return []connect.ClientOption{
		// Nil constructors take gzip off the client's list (it is on by
		// default): this line turns compression off, it does not add it.
		connect.WithAcceptCompression("gzip", nil, nil),
		connect.WithReadMaxBytes(p.host.cfg.MaxMessageBytes),
	}
}

// callError turns the failure of the call op into the connector's error:
//
//   - the plugin's own error (a Connect error it sent): its message is the
//     error JSON, decoded by cerrors.FromWire, so the code (and that it was
//     classified by JSON) holds whatever prefix is added;
//   - ctx is done: ctx's error;
//   - the process exited: a transient error naming the exit status;
//   - anything else (the call did not get through): transient.
func (p *pluginProcess) callError(ctx context.Context, op string, err error) error {
	if connect.IsWireError(err) {
		return fmt.Errorf("standalone connector %q: %s: %w", p.name, op, cerrors.FromWire(wireMessage(err)))
	}
	if connect.CodeOf(err) == connect.CodeResourceExhausted {
		// This client's read limit, not the plugin's error. The plugin
		// would send the same message after a restart (the same records
		// from the same position), so a restart loop buys nothing: 413
		// (fatal) stops the pipeline and says what to fix.
		return cerrors.WithCode(fmt.Errorf("standalone connector %q: %s: the plugin sent a message larger than %d bytes "+
			"(connectors: a plugin message is at most %s; a plugin built with pkg/sdk splits its batches to fit): %w",
			p.name, op, p.host.cfg.MaxMessageBytes, humanBytes(p.host.cfg.MaxMessageBytes), err), cerrors.CodePayloadTooLarge)
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("standalone connector %q: %s: %w", p.name, op, ctxErr)
	}
	t := time.NewTimer(exitWait)
	defer t.Stop()
	select {
	case <-p.exited:
		return p.exitedError()
	case <-t.C:
	}
	return cerrors.Transient(fmt.Errorf("standalone connector %q: %s: %w", p.name, op, err))
}

// humanBytes writes n in MiB when it is a whole number of them.
func humanBytes(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// wireMessage is the message a plugin sent with its error.
func wireMessage(err error) string {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return err.Error()
	}
	if msg := ce.Message(); msg != "" {
		return msg
	}
	return ce.Code().String()
}

// exitedError is the transient error of a process that died while it was
// in use.
func (p *pluginProcess) exitedError() error {
	return cerrors.Transient(fmt.Errorf("standalone connector %q exited: %s%s", p.name, p.exitStatus(), p.stderrTail()))
}

// exitStatus says how the process ended ("exit status 2", "signal:
// killed"). Only call it once p.exited is closed.
func (p *pluginProcess) exitStatus() string {
	if st := p.cmd.ProcessState; st != nil {
		return st.String()
	}
	return "unknown exit status"
}

// stderrTail quotes the last lines the process wrote to stderr. When the
// process has exited it first lets the reader reach the end of the output,
// so the lines written just before the exit are there.
func (p *pluginProcess) stderrTail() string {
	select {
	case <-p.exited:
		t := time.NewTimer(outputWait)
		select {
		case <-p.outDone[1]:
		case <-t.C:
		}
		t.Stop()
	default:
	}
	lines := p.stderr.lines()
	if len(lines) == 0 {
		return "; nothing on stderr"
	}
	return "; last stderr lines: " + strings.Join(lines, " | ")
}

// close ends the connector's process: teardown (the plugin's Teardown call)
// if the process is ready and alive, then SIGTERM, SIGKILL after the stop
// timeout, and the cleanup. It returns teardown's error. Safe to call when
// start failed or never ran, and more than once.
func (p *pluginProcess) close(ctx context.Context, teardown func(context.Context) error) error {
	if p.stopped || p.cmd == nil {
		p.stop(0)
		return nil
	}
	var err error
	if p.ready && !p.hasExited() {
		callCtx, cancel := context.WithTimeout(ctx, p.host.cfg.TeardownTimeout)
		if callErr := teardown(callCtx); callErr != nil {
			err = p.callError(callCtx, "teardown", callErr)
		}
		cancel()
	}
	grace := p.host.cfg.StopTimeout
	if d, ok := ctx.Deadline(); ok {
		grace = max(0, min(grace, time.Until(d)))
	}
	p.stop(grace)
	return err
}

func (p *pluginProcess) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// stop stops the process (SIGTERM, then SIGKILL after grace; at once with
// grace 0), waits for it and its output readers, and removes the private
// directory. Safe to call more than once and before start.
func (p *pluginProcess) stop(grace time.Duration) {
	if p.stopped {
		return
	}
	p.stopped = true
	// The processes the plugin started, found while it still runs (before
	// it is asked to exit): once it exits, a child that left its process
	// group (setsid) links to it no more.
	var tree processTree
	if p.cmd != nil && !p.hasExited() {
		tree = findDescendants(p.cmd.Process.Pid)
	}
	defer tree.kill() // released on every path; a no-op once killed below
	if p.conduit != nil {
		// Asks the plugin to shut down; the signals below are for one
		// that does not.
		p.conduit.close()
	}
	if p.cmd != nil {
		if !p.hasExited() {
			if grace > 0 {
				_ = terminate(p.cmd.Process)
				tree.terminate()
				t := time.NewTimer(grace)
				select {
				case <-p.exited:
				case <-t.C:
					p.log.Warn("standalone connector did not exit after SIGTERM; killing it",
						zap.Duration("stop_timeout", grace))
				}
				t.Stop()
			}
			if !p.hasExited() {
				_ = kill(p.cmd.Process)
			}
			<-p.exited
		}
		// What the plugin left behind: the rest of its process group
		// (the group outlives its leader while a member runs, so its id
		// is not reused) and the processes below it in other groups.
		_ = kill(p.cmd.Process)
		tree.kill()
		p.log.Debug("standalone connector stopped", zap.String("exit", p.exitStatus()))
		t := time.NewTimer(outputWait)
		for _, done := range p.outDone {
			select {
			case <-done:
			case <-t.C:
				// Someone (a child of the plugin) holds the pipe open:
				// closing the read end ends the reader.
				for _, f := range p.outputs {
					_ = f.Close()
				}
				<-done
			}
		}
		t.Stop()
		for _, f := range p.outputs {
			_ = f.Close()
		}
	}
	if p.transport != nil {
		p.transport.CloseIdleConnections()
	}
	if p.utilities != nil {
		p.utilities()
	}
	if p.dir != "" {
		if err := os.RemoveAll(p.dir); err != nil {
			p.log.Warn("removing the standalone connector's socket directory", zap.String("dir", p.dir), zap.Error(err))
		}
	}
}

// lineRing keeps the last stderrTailLines lines.
type lineRing struct {
	mu   sync.Mutex
	buf  [stderrTailLines]string
	next int
	n    int
}

func (r *lineRing) add(s string) {
	if len(s) > maxQuotedLine {
		s = s[:maxQuotedLine] + "..."
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf[r.next] = s
	r.next = (r.next + 1) % len(r.buf)
	r.n = min(r.n+1, len(r.buf))
}

func (r *lineRing) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, r.n)
	for i := range r.n {
		out = append(out, r.buf[(r.next-r.n+i+len(r.buf))%len(r.buf)])
	}
	return out
}
