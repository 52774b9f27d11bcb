// Package pgfault tells, of an error from PostgreSQL's driver, whether the
// server could not be reached or went away - a fault the next attempt may
// not have - rather than refusing what was asked. The store (pkg/store)
// and the cluster's membership (pkg/cluster) both classify by it, so that
// an outage reads the same to both.
package pgfault

import (
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// Unavailable reports whether err says the server could not be reached or
// went away: a failure to connect (refused, a server starting up or with
// all its connections taken, as when every client reconnects at once after
// a restart), a connection exception, a shutdown or crash of the server,
// or a network error. nil is not.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// Class 08 is connection exceptions; 57P01-03 are the server
		// shutting down, crashing or starting up; 53300 too many
		// connections.
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03" || pe.Code == "53300"
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		pgconn.SafeToRetry(err)
}
