package api

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const peerUsersKnown = true

// systemPeerUsers asks the kernel for the socket with exactly the
// connection's four addresses (NETLINK_SOCK_DIAG), and reads
// /proc/net/tcp and tcp6 where netlink is not allowed (a seccomp profile).
func systemPeerUsers(local, remote *net.TCPAddr) (uint32, error) {
	uid, err := sockDiagUID(local, remote)
	if err == nil {
		return uid, nil
	}
	uid, perr := procNetUID(local, remote)
	if perr == nil {
		return uid, nil
	}
	return 0, fmt.Errorf("sock_diag: %w; /proc/net/tcp: %w", err, perr)
}

// Sizes and offsets of struct inet_diag_req_v2 and struct inet_diag_msg
// (linux/inet_diag.h).
const (
	nlmsgHeaderLen   = 16
	inetDiagReqLen   = 56
	inetDiagMsgUID   = 64 // idiag_uid in inet_diag_msg
	inetDiagMsgInode = 68 // idiag_inode
	inetDiagMsgLen   = 72
	inetDiagNoCookie = ^uint32(0)
	sockDiagTimeout  = time.Second
)

// sockDiagUID looks up the client's socket: its source is the server's
// remote address and its destination the server's local one.
func sockDiagUID(local, remote *net.TCPAddr) (uint32, error) {
	families := []uint8{unix.AF_INET6}
	if local.IP.To4() != nil && remote.IP.To4() != nil {
		// An IPv4 connection may also be held by an IPv6 socket
		// (v4-mapped addresses).
		families = []uint8{unix.AF_INET, unix.AF_INET6}
	}
	var err error
	for _, family := range families {
		var uid uint32
		if uid, err = sockDiagFamily(family, remote, local); err == nil {
			return uid, nil
		}
	}
	return 0, err
}

func sockDiagFamily(family uint8, src, dst *net.TCPAddr) (uint32, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return 0, fmt.Errorf("netlink socket: %w", err)
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(sockDiagTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return 0, fmt.Errorf("netlink socket timeout: %w", err)
	}

	req := make([]byte, nlmsgHeaderLen+inetDiagReqLen)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST)
	ne.PutUint32(req[8:], 1) // sequence
	body := req[nlmsgHeaderLen:]
	body[0] = family
	body[1] = unix.IPPROTO_TCP
	ne.PutUint32(body[4:], ^uint32(0)) // every state
	id := body[8:]
	binary.BigEndian.PutUint16(id[0:], uint16(src.Port))
	binary.BigEndian.PutUint16(id[2:], uint16(dst.Port))
	putDiagAddr(id[4:20], src.IP, family)
	putDiagAddr(id[20:36], dst.IP, family)
	ne.PutUint32(id[40:], inetDiagNoCookie)
	ne.PutUint32(id[44:], inetDiagNoCookie)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, fmt.Errorf("netlink send: %w", err)
	}

	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return 0, fmt.Errorf("netlink receive: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return 0, fmt.Errorf("netlink answer: %w", err)
	}
	for _, m := range msgs {
		switch m.Header.Type {
		case unix.NLMSG_ERROR:
			if len(m.Data) >= 4 {
				if errno := -int32(ne.Uint32(m.Data)); errno != 0 {
					return 0, syscall.Errno(errno)
				}
			}
		case unix.SOCK_DIAG_BY_FAMILY:
			if len(m.Data) < inetDiagMsgLen {
				return 0, fmt.Errorf("netlink answer of %d bytes, want %d", len(m.Data), inetDiagMsgLen)
			}
			got := m.Data[4:]
			if binary.BigEndian.Uint16(got[0:]) != uint16(src.Port) || binary.BigEndian.Uint16(got[2:]) != uint16(dst.Port) {
				return 0, errors.New("netlink answered for another socket")
			}
			if ne.Uint32(m.Data[inetDiagMsgInode:]) == 0 {
				return 0, errClientClosed
			}
			return ne.Uint32(m.Data[inetDiagMsgUID:]), nil
		}
	}
	return 0, errors.New("netlink answered no socket")
}

// errClientClosed: the client's socket is no process's any more (it
// closed it), and the kernel then reports it as root's (uid 0). Its user
// cannot be known, so it is not trusted.
var errClientClosed = errors.New("the client closed its end of the connection")

// putDiagAddr writes ip as an idiag_src or idiag_dst (network order).
func putDiagAddr(dst []byte, ip net.IP, family uint8) {
	if family == unix.AF_INET {
		copy(dst, ip.To4())
		return
	}
	copy(dst, ip.To16())
}

// procNetUID finds the client's socket in /proc/net/tcp and tcp6, whose
// lines hold "local_address rem_address st ... uid timeout inode" with
// addresses in hex as the kernel prints them.
func procNetUID(local, remote *net.TCPAddr) (uint32, error) {
	var errs []error
	for _, f := range []struct {
		path string
		v6   bool
	}{{"/proc/net/tcp", false}, {"/proc/net/tcp6", true}} {
		if !f.v6 && (local.IP.To4() == nil || remote.IP.To4() == nil) {
			continue
		}
		uid, err := procNetFileUID(f.path, procNetAddr(remote, f.v6), procNetAddr(local, f.v6))
		if err == nil {
			return uid, nil
		}
		errs = append(errs, err)
	}
	return 0, errors.Join(errs...)
}

func procNetFileUID(path, src, dst string) (uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[1] != src || fields[2] != dst {
			continue
		}
		if fields[9] == "0" { // inode
			return 0, errClientClosed
		}
		uid, err := strconv.ParseUint(fields[7], 10, 32)
		if err != nil {
			return 0, fmt.Errorf("%s: uid %q: %w", path, fields[7], err)
		}
		return uint32(uid), nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return 0, fmt.Errorf("%s has no socket from %s to %s", path, src, dst)
}

// procNetAddr formats a as /proc/net/tcp does: each 32-bit word of the
// address as the kernel holds it in memory, then the port, in hex.
func procNetAddr(a *net.TCPAddr, v6 bool) string {
	ip := a.IP.To4()
	if v6 {
		ip = a.IP.To16()
	}
	var b strings.Builder
	for i := 0; i+4 <= len(ip); i += 4 {
		fmt.Fprintf(&b, "%08X", binary.NativeEndian.Uint32(ip[i:]))
	}
	fmt.Fprintf(&b, ":%04X", a.Port)
	return b.String()
}
