package api

import (
	"context"
	"fmt"
	"net"
	"sync"

	"connectrpc.com/connect"
)

// watcherLimits caps the server streams (event watches) open at once, in
// all and per client IP address: each one holds a goroutine, a stream and
// an audit log watcher for as long as the client likes. Clients behind one
// proxy share its address and so its share.
type watcherLimits struct {
	max, perClient int

	mu       sync.Mutex
	total    int
	byClient map[string]int
}

func newWatcherLimits(max, perClient int) *watcherLimits {
	return &watcherLimits{max: max, perClient: perClient, byClient: map[string]int{}}
}

// acquire takes a slot for client, or returns a RESOURCE_EXHAUSTED error
// saying which limit was reached. release gives the slot back.
func (l *watcherLimits) acquire(client string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.total >= l.max {
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf(
			"%d event watches are open, the most this server allows (api.max-watchers); close one or try again later", l.total))
	}
	if l.byClient[client] >= l.perClient {
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf(
			"client %s has %d event watches open, the most one client may have (api.max-watchers-per-client); close one first", client, l.byClient[client]))
	}
	l.total++
	l.byClient[client]++
	return nil
}

func (l *watcherLimits) release(client string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.byClient[client]--; l.byClient[client] <= 0 {
		delete(l.byClient, client)
	}
}

func (l *watcherLimits) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc { return next }

func (l *watcherLimits) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (l *watcherLimits) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		client := clientAddress(conn.Peer().Addr)
		if err := l.acquire(client); err != nil {
			return err
		}
		defer l.release(client)
		return next(ctx, conn)
	}
}

// clientAddress is the IP address of a peer "ip:port".
func clientAddress(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}
