package cluster

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
)

// Notification is one PostgreSQL notification received.
type Notification struct {
	Channel, Payload string
}

// Listen holds one connection that listens on channels and hands every
// notification to handle, until ctx is done. The connection is opened
// again when it breaks (the database restarted, say); since
// notifications sent meanwhile are lost, handle then gets a notification
// with an empty Channel, which means "anything may have changed".
// handle runs on Listen's goroutine: it must not block for long.
func Listen(ctx context.Context, pool *pgxpool.Pool, channels []string, log *zap.Logger, handle func(Notification)) {
	backoff := 100 * time.Millisecond
	first := true
	for ctx.Err() == nil {
		err := listenOnce(ctx, pool, channels, func() {
			backoff = 100 * time.Millisecond
			if !first {
				handle(Notification{})
			}
			first = false
		}, handle)
		if ctx.Err() != nil {
			return
		}
		log.Warn("listening for the other instances' notifications failed; trying again", zap.Error(err), zap.Duration("in", backoff))
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func listenOnce(ctx context.Context, pool *pgxpool.Pool, channels []string, listening func(), handle func(Notification)) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection carries LISTEN state: it is closed, not returned to
	// the pool.
	defer func() {
		_ = conn.Conn().Close(context.WithoutCancel(ctx))
		conn.Release()
	}()
	for _, ch := range channels {
		if _, err := conn.Exec(ctx, `LISTEN `+quoteIdent(ch)); err != nil {
			return err
		}
	}
	listening()
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			return err
		}
		handle(Notification{Channel: n.Channel, Payload: n.Payload})
	}
}

// quoteIdent quotes a channel name (ours are plain, but LISTEN takes no
// parameters).
func quoteIdent(s string) string {
	out := []byte{'"'}
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			out = append(out, '"')
		}
		out = append(out, s[i])
	}
	return string(append(out, '"'))
}
