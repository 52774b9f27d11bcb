package api

import (
	"net/http"
	"time"
)

// withWriteDeadlines bounds each write of a response with a deadline of
// its own, which (unlike http.Server's WriteTimeout, a deadline for the
// whole response) leaves a long response - a watch stream - running as
// long as the client keeps reading it.
func withWriteDeadlines(next http.Handler, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		next.ServeHTTP(&deadlineWriter{ResponseWriter: w, rc: rc, timeout: timeout}, r)
		// What the server writes after the handler (the rest of a
		// buffered response) is bounded too.
		_ = rc.SetWriteDeadline(time.Now().Add(timeout))
	})
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
