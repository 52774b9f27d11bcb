package pgfault

import (
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestUnavailable(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"connection refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true},
		{"reset", syscall.ECONNRESET, true},
		{"eof", io.ErrUnexpectedEOF, true},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"connection exception", &pgconn.PgError{Code: "08006"}, true},
		{"too many connections", &pgconn.PgError{Code: "53300"}, true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"wal_level", &pgconn.PgError{Code: "55000"}, false},
		{"plain error", errors.New("syntax error"), false},
	} {
		if got := Unavailable(tt.err); got != tt.want {
			t.Errorf("%s: Unavailable = %v, want %v", tt.name, got, tt.want)
		}
	}
}
