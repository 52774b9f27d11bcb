package api

import (
	"io"
	"net/http"
	"time"
)

// withDeadlines bounds reading a request's body and each write of its
// response with per-request deadlines, which (unlike http.Server's
// ReadTimeout and WriteTimeout) leave a long response - a watch stream -
// running as long as the client reads it.
func withDeadlines(next http.Handler, readTimeout, writeTimeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if r.Body != nil && r.Body != http.NoBody {
			// Errors mean the writer has no deadlines (tests); there is
			// nothing to bound then.
			if rc.SetReadDeadline(time.Now().Add(readTimeout)) == nil {
				r.Body = &liftingBody{ReadCloser: r.Body, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
			}
		}
		next.ServeHTTP(&deadlineWriter{ResponseWriter: w, rc: rc, timeout: writeTimeout}, r)
		// What the server writes after the handler (the rest of a
		// buffered response) is bounded too.
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	})
}

// liftingBody lifts the read deadline once the body is read to its end:
// over HTTP/1.1 the server goes on reading the connection to notice a
// client that leaves, and a deadline passing there would cancel the
// response.
type liftingBody struct {
	io.ReadCloser
	lift   func()
	lifted bool
}

func (b *liftingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !b.lifted {
		b.lifted = true
		b.lift()
	}
	return n, err
}

// deadlineWriter sets the write deadline around each write and flush, and
// clears it after, so the time between two events of a stream is not
// limited, only the time the client takes to take one.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (w *deadlineWriter) arm()    { _ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout)) }
func (w *deadlineWriter) disarm() { _ = w.rc.SetWriteDeadline(time.Time{}) }

func (w *deadlineWriter) Write(p []byte) (int, error) {
	w.arm()
	defer w.disarm()
	return w.ResponseWriter.Write(p)
}

// Flush implements http.Flusher, which Connect requires of streams.
func (w *deadlineWriter) Flush() { _ = w.FlushError() }

// FlushError is what http.ResponseController calls.
func (w *deadlineWriter) FlushError() error {
	w.arm()
	defer w.disarm()
	return w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
