//go:build !linux

package api

import "net"

const peerUsersKnown = false

func systemPeerUsers(*net.TCPAddr, *net.TCPAddr) (uint32, error) { return 0, errPeerUnsupported }
