package api

import (
	"bufio"
	"io"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// The system's lookup finds the user of a client in another process, by
// netlink and by /proc/net/tcp, over IPv4 and IPv6.
func TestSystemPeerUsers(t *testing.T) {
	requireRoot(t)
	bin := publicTestBinary(t)
	for _, network := range []struct{ name, addr string }{{"IPv4", "127.0.0.1:0"}, {"IPv6", "[::1]:0"}} {
		t.Run(network.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", network.addr)
			if err != nil {
				t.Fatalf("listen %s: %v", network.addr, err)
			}
			defer ln.Close()

			// A client of this process: conduit's own user.
			own, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer own.Close()
			checkPeer(t, ln, uint32(os.Geteuid()))

			// A client running as nobody.
			cmd := exec.Command(bin, "-test.run=^TestPeerDialProcess$")
			cmd.Env = append(os.Environ(), peerDialEnv+"="+ln.Addr().String())
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: otherUID, Gid: otherUID}}
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				_ = stdin.Close()
				_ = cmd.Wait()
			}()
			if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
				t.Fatalf("client as nobody: %q %v", line, err)
			}
			checkPeer(t, ln, otherUID)
		})
	}
}

// checkPeer accepts the next connection and checks each lookup's answer.
func checkPeer(t *testing.T, ln net.Listener, want uint32) {
	t.Helper()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	local, remote := c.LocalAddr().(*net.TCPAddr), c.RemoteAddr().(*net.TCPAddr)
	for name, lookup := range map[string]peerUsers{"netlink": sockDiagUID, "/proc/net": procNetUID, "system": systemPeerUsers} {
		if uid, err := lookup(local, remote); err != nil || uid != want {
			t.Errorf("%s: uid %d, %v; want %d", name, uid, err, want)
		}
	}
	// The server's end is not a client of itself.
	if uid, err := sockDiagUID(remote, local); err == nil && uid == want && want == otherUID {
		t.Errorf("netlink found the client's user for the server's end")
	}
}

const peerDialEnv = "CONDUIT_TEST_PEER_DIAL"

// TestPeerDialProcess is the client TestSystemPeerUsers runs as another
// user: it connects and holds the connection until its stdin closes.
func TestPeerDialProcess(t *testing.T) {
	addr := os.Getenv(peerDialEnv)
	if addr == "" {
		return // run by TestSystemPeerUsers only
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	os.Stdout.WriteString("ready\n")
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// A client that closed its end leaves a socket the kernel keeps without
// its user (uid 0, as root's): it must not count as root.
func TestClosedClientIsNotRoot(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	local, remote := server.LocalAddr().(*net.TCPAddr), server.RemoteAddr().(*net.TCPAddr)
	_ = client.Close()
	for name, lookup := range map[string]peerUsers{"netlink": sockDiagUID, "/proc/net": procNetUID} {
		if uid, err := lookup(local, remote); err == nil {
			t.Errorf("%s: uid %d for a client that closed its end, want an error", name, uid)
		}
	}
}
