package connector

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/conduitio/conduit-commons/config"
	"github.com/conduitio/conduit-connector-protocol/pconnector"
	v2 "github.com/conduitio/conduit-connector-protocol/pconnector/v2"
	clientv2 "github.com/conduitio/conduit-connector-protocol/pconnector/v2/client"
	"github.com/conduitio/conduit-connector-protocol/pconnutils"
	utilsserver "github.com/conduitio/conduit-connector-protocol/pconnutils/v1/server"
	connutilsv1 "github.com/conduitio/conduit-connector-protocol/proto/connutils/v1"
	sdkschema "github.com/conduitio/conduit-connector-sdk/schema"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/conduitplugin"
)

// Conduit's connector protocol: a connector built with Conduit's connector
// SDK is a go-plugin executable. It finds its settings in the environment
// (a magic cookie, its connector id, a token and the address of the
// connector utilities service, which serves the schema registry), listens
// on a unix socket, and prints a handshake line on stdout:
//
//	1|2|unix|/path/to/socket|grpc|
//
// (go-plugin's core protocol, the app protocol version, the network, the
// address, the RPC protocol). The runtime starts every standalone
// executable with the environment of both protocols; a plugin of pkg/sdk
// answers on its socket, a plugin of Conduit's SDK prints that line, and
// the first to come decides. The runtime then attaches go-plugin's client
// to the running process (it keeps owning the process: start, stderr,
// stop, reap) and runs the plugin through pkg/conduitplugin.

// Environment of Conduit's connector protocol.
const (
	envPluginProtocolVersions = "PLUGIN_PROTOCOL_VERSIONS"
	envPluginUnixSocketDir    = "PLUGIN_UNIX_SOCKET_DIR"
)

// conduitProtocolVersion is the version of Conduit's connector protocol
// the runtime speaks (the one of Conduit's SDK since v0.10).
const conduitProtocolVersion = v2.Version

// conduitEnv is the part of a plugin's environment for Conduit's protocol.
func (p *pluginProcess) conduitEnv() []string {
	level := "info"
	if p.log.Core().Enabled(zap.DebugLevel) {
		level = "debug"
	}
	return []string{
		pconnector.HandshakeConfig.MagicCookieKey + "=" + pconnector.HandshakeConfig.MagicCookieValue,
		envPluginProtocolVersions + "=" + strconv.Itoa(conduitProtocolVersion),
		envPluginUnixSocketDir + "=" + p.dir,
		pconnector.EnvConduitConnectorID + "=" + p.cfg.PipelineID + ":" + p.cfg.ConnectorID,
		pconnector.EnvConduitConnectorLogLevel + "=" + level,
		pconnector.EnvConduitConnectorMaxReceiveRecordSize + "=" + strconv.Itoa(p.host.cfg.MaxMessageBytes),
		pconnutils.EnvConduitConnectorToken + "=" + p.token,
		pconnutils.EnvConduitConnectorUtilitiesGRPCTarget + "=unix://" + p.utilitiesSocket(),
	}
}

func (p *pluginProcess) utilitiesSocket() string { return filepath.Join(p.dir, "utilities.sock") }

func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// serveUtilities serves the connector utilities service (the schema
// registry of Conduit's SDK, shared with the connectors compiled in) on a
// socket in the plugin's private directory, for as long as the process
// runs.
func (p *pluginProcess) serveUtilities() error {
	var lc net.ListenConfig
	l, err := lc.Listen(context.Background(), "unix", p.utilitiesSocket())
	if err != nil {
		return cerrors.Transient(fmt.Errorf("standalone connector %q: listening for the connector utilities service: %w", p.name, err))
	}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(p.host.cfg.MaxMessageBytes))
	connutilsv1.RegisterSchemaServiceServer(srv, utilsserver.NewSchemaServiceServer(sdkschema.Service))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l) // returns once Stop closed the listener
	}()
	p.utilities = func() {
		srv.Stop()
		<-done
	}
	return nil
}

// conduitHandshake parses go-plugin's handshake line; ok is false for any
// other line. Only unix sockets and loopback TCP are accepted.
func conduitHandshake(line string) (version int, addr net.Addr, ok bool) {
	parts := strings.Split(strings.TrimSpace(line), "|")
	if len(parts) < 5 || parts[0] != strconv.Itoa(plugin.CoreProtocolVersion) || parts[4] != string(plugin.ProtocolGRPC) {
		return 0, nil, false
	}
	version, err := strconv.Atoi(parts[1])
	if err != nil {
		return 0, nil, false
	}
	switch parts[2] {
	case "unix":
		a, err := net.ResolveUnixAddr("unix", parts[3])
		if err != nil {
			return 0, nil, false
		}
		return version, a, true
	case "tcp":
		a, err := net.ResolveTCPAddr("tcp", parts[3])
		if err != nil || !a.IP.IsLoopback() {
			return 0, nil, false
		}
		return version, a, true
	}
	return 0, nil, false
}

// protocolVersionError is a plugin of Conduit's protocol that speaks
// another version of it than the runtime.
type protocolVersionError struct{ version int }

func (e *protocolVersionError) Error() string {
	return fmt.Sprintf("speaks version %d of Conduit's connector protocol; this runtime speaks version %d "+
		"(rebuild the connector with Conduit's connector SDK v0.10 or later)", e.version, conduitProtocolVersion)
}

// conduitPlugin is go-plugin's client attached to a running plugin of
// Conduit's protocol.
type conduitPlugin struct {
	client *plugin.Client
	rpc    plugin.ClientProtocol
	out    *lineLogger
}

// attachConduit attaches to the plugin that printed line.
func (p *pluginProcess) attachConduit(line string) error {
	version, addr, _ := conduitHandshake(line)
	if version != conduitProtocolVersion {
		return cerrors.Fatal(fmt.Errorf("standalone connector %q: executable %s %w",
			p.name, p.executable(), &protocolVersionError{version: version}))
	}
	out := &lineLogger{log: p.log.With(zap.String("stream", "stderr")), ring: &p.stderr}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig: pconnector.HandshakeConfig,
		Plugins: plugin.PluginSet{
			"specifier": &grpcPlugin[pconnector.SpecifierPlugin]{newClient: func(cc *grpc.ClientConn) pconnector.SpecifierPlugin { return clientv2.NewSpecifierPluginClient(cc) }},
			"source":    &grpcPlugin[conduitplugin.SourcePlugin]{newClient: func(cc *grpc.ClientConn) conduitplugin.SourcePlugin { return clientv2.NewSourcePluginClient(cc) }},
			"destination": &grpcPlugin[conduitplugin.DestinationPlugin]{newClient: func(cc *grpc.ClientConn) conduitplugin.DestinationPlugin {
				return clientv2.NewDestinationPluginClient(cc)
			}},
		},
		Reattach: &plugin.ReattachConfig{
			Protocol:        plugin.ProtocolGRPC,
			ProtocolVersion: version,
			Addr:            addr,
			Pid:             p.cmd.Process.Pid,
			ReattachFunc:    func() (runner.AttachedRunner, error) { return attachedProcess{p}, nil },
		},
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		// What the plugin writes to stdout and stderr after the handshake
		// travels over the connection; it is logged like its direct
		// output.
		SyncStdout: out,
		SyncStderr: out,
		Logger: hclog.New(&hclog.LoggerOptions{
			Name: "plugin", Output: &lineLogger{log: p.log}, JSONFormat: true, Level: hclog.Warn,
		}),
		GRPCDialOptions: []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(p.host.cfg.MaxMessageBytes))},
	})
	rpc, err := client.Client()
	if err != nil {
		return cerrors.Fatal(fmt.Errorf("standalone connector %q: connecting to executable %s: %w%s", p.name, p.executable(), err, p.stderrTail()))
	}
	p.conduit = &conduitPlugin{client: client, rpc: rpc, out: out}
	return nil
}

// dispense returns the plugin's implementation of kind (source,
// destination or specifier).
func (c *conduitPlugin) dispense(kind string) (any, error) { return c.rpc.Dispense(kind) }

// close asks the plugin to shut down and closes the connection; the
// process is then stopped and reaped by the pluginProcess.
func (c *conduitPlugin) close() {
	_ = c.rpc.Close()
	c.out.flush()
}

// grpcPlugin is go-plugin's Plugin for one client type of the protocol.
type grpcPlugin[T any] struct {
	plugin.NetRPCUnsupportedPlugin
	newClient func(*grpc.ClientConn) T
}

func (g *grpcPlugin[T]) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, cc *grpc.ClientConn) (any, error) {
	return g.newClient(cc), nil
}

func (g *grpcPlugin[T]) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error {
	return fmt.Errorf("the runtime is a plugin client only")
}

// attachedProcess is the plugin process as go-plugin's attached runner:
// the pluginProcess owns it, so Kill only stops it the way close would.
type attachedProcess struct{ p *pluginProcess }

func (a attachedProcess) Wait(ctx context.Context) error {
	select {
	case <-a.p.exited:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

func (a attachedProcess) Kill(context.Context) error {
	_ = terminate(a.p.cmd.Process)
	return nil
}

func (a attachedProcess) ID() string { return strconv.Itoa(a.p.cmd.Process.Pid) }

func (a attachedProcess) PluginToHost(network, address string) (string, string, error) {
	return network, address, nil
}

func (a attachedProcess) HostToPlugin(network, address string) (string, string, error) {
	return network, address, nil
}

// lineLogger logs what is written to it line by line (a JSON line with its
// level and fields, see conduitplugin.LogLine), keeping the last lines
// for error messages when ring is set.
type lineLogger struct {
	log  *zap.Logger
	ring *lineRing

	mu      sync.Mutex
	partial []byte
}

func (l *lineLogger) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, b...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.line(l.partial[:i])
		l.partial = l.partial[i+1:]
	}
	if len(l.partial) > 64<<10 {
		l.line(l.partial)
		l.partial = nil
	}
	return len(b), nil
}

func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.partial) > 0 {
		l.line(l.partial)
		l.partial = nil
	}
}

func (l *lineLogger) line(b []byte) {
	b = bytes.TrimRight(b, "\r")
	if len(bytes.TrimSpace(b)) == 0 {
		return
	}
	conduitplugin.LogLine(l.log, b)
	if l.ring != nil {
		l.ring.add(string(b))
	}
}

// conduitSource dispenses the plugin's source and the options the adapter
// runs it with.
func (p *pluginProcess) conduitSource(ctx context.Context) (conduitplugin.SourcePlugin, conduitplugin.Options, error) {
	raw, err := p.conduit.dispense("source")
	if err != nil {
		return nil, conduitplugin.Options{}, p.conduitError(ctx, fmt.Errorf("standalone connector %q: %w", p.name, err))
	}
	spec := p.specify(ctx)
	return raw.(conduitplugin.SourcePlugin), p.conduitOptions(spec.SourceParams), nil
}

// conduitDestination is conduitSource for a destination.
func (p *pluginProcess) conduitDestination(ctx context.Context) (conduitplugin.DestinationPlugin, conduitplugin.Options, error) {
	raw, err := p.conduit.dispense("destination")
	if err != nil {
		return nil, conduitplugin.Options{}, p.conduitError(ctx, fmt.Errorf("standalone connector %q: %w", p.name, err))
	}
	spec := p.specify(ctx)
	return raw.(conduitplugin.DestinationPlugin), p.conduitOptions(spec.DestinationParams), nil
}

// specify asks the plugin for its specification; the adapter uses its
// parameters to know which SDK settings the plugin has. A plugin that
// cannot tell still runs, with the settings as the file has them.
func (p *pluginProcess) specify(ctx context.Context) pconnector.Specification {
	raw, err := p.conduit.dispense("specifier")
	if err == nil {
		var resp pconnector.SpecifierSpecifyResponse
		if resp, err = raw.(pconnector.SpecifierPlugin).Specify(ctx, pconnector.SpecifierSpecifyRequest{}); err == nil {
			p.log.Info("standalone connector specification",
				zap.String("plugin_name", resp.Specification.Name), zap.String("plugin_version", resp.Specification.Version))
			return resp.Specification
		}
	}
	p.log.Warn("standalone connector gave no specification", zap.Error(err))
	return pconnector.Specification{}
}

func (p *pluginProcess) conduitOptions(params config.Parameters) conduitplugin.Options {
	o := conduitplugin.Options{
		PipelineID:  p.cfg.PipelineID,
		ConnectorID: p.cfg.ConnectorID,
		Plugin:      "standalone:" + p.name,
		Settings:    p.cfg.Settings,
		Logger:      p.log,
		Params:      params,
		Remote:      true,
	}
	if p.cfg.State != nil {
		o.State = p.cfg.State
	}
	return o
}

// conduitError turns the error of a call to a plugin of Conduit's protocol
// into the connector's error: the exit of the process when it died (a
// crash is transient, with its exit status and last stderr lines), else
// err as it is.
func (p *pluginProcess) conduitError(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil {
		return err
	}
	if p.hasExited() {
		return p.exitedError()
	}
	if status.Code(err) != codes.Unavailable {
		// The plugin's own error: it is alive and said so.
		return err
	}
	// The connection broke; a dying process closes it a moment before it
	// is reaped.
	t := time.NewTimer(exitWait)
	defer t.Stop()
	select {
	case <-p.exited:
		return p.exitedError()
	case <-t.C:
		return err
	}
}
