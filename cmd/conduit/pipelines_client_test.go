package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	conduitv1 "github.com/conduitry/conduit/pkg/api/gen/conduit/v1"
	"github.com/conduitry/conduit/pkg/api/gen/conduit/v1/conduitv1connect"
)

// fakeService is a PipelineService whose watch streams are scripted per
// call, to drive the client through drops and reconnects.
type fakeService struct {
	conduitv1connect.UnimplementedPipelineServiceHandler

	// watch serves the n-th WatchPipelineEvents call (from 0).
	watch func(ctx context.Context, n int, send func(seq uint64) error) error
	// get answers the n-th GetPipeline call; nil answers "running".
	get func(n int) error

	mu          sync.Mutex
	auth        []string // Authorization of every call, in order
	watchAfters []uint64
	gets        int
}

func (f *fakeService) GetPipeline(_ context.Context, req *connect.Request[conduitv1.GetPipelineRequest]) (*connect.Response[conduitv1.GetPipelineResponse], error) {
	f.mu.Lock()
	f.auth = append(f.auth, req.Header().Get("Authorization"))
	n := f.gets
	f.gets++
	f.mu.Unlock()
	if f.get != nil {
		if err := f.get(n); err != nil {
			return nil, err
		}
	}
	return connect.NewResponse(&conduitv1.GetPipelineResponse{Pipeline: &conduitv1.Pipeline{Id: req.Msg.GetId(), Status: running}}), nil
}

func (f *fakeService) WatchPipelineEvents(ctx context.Context, req *connect.Request[conduitv1.WatchPipelineEventsRequest], stream *connect.ServerStream[conduitv1.WatchPipelineEventsResponse]) error {
	f.mu.Lock()
	f.auth = append(f.auth, req.Header().Get("Authorization"))
	f.watchAfters = append(f.watchAfters, req.Msg.GetAfterSequence())
	n := len(f.watchAfters) - 1
	f.mu.Unlock()
	return f.watch(ctx, n, func(seq uint64) error {
		return stream.Send(&conduitv1.WatchPipelineEventsResponse{Event: &conduitv1.PipelineEvent{
			Sequence: seq, PipelineId: req.Msg.GetPipelineId(), Kind: "running",
		}})
	})
}

// seen returns the Authorization headers and the watch after_sequences so
// far.
func (f *fakeService) seen() (auth []string, watchAfters []uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.auth), slices.Clone(f.watchAfters)
}

func serveFake(t *testing.T, f *fakeService) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(conduitv1connect.NewPipelineServiceHandler(f))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func sendAll(send func(uint64) error, seqs ...uint64) error {
	for _, s := range seqs {
		if err := send(s); err != nil {
			return err
		}
	}
	return nil
}

// testFollower prints sequences into printed and cancels the follow once
// it printed stopAt. It records the backoff delays instead of sleeping.
type testFollower struct {
	*follower
	printed []uint64
	delays  []time.Duration
	notices bytes.Buffer
}

func newTestFollower(address, token string, cancel context.CancelFunc, stopAt uint64) *testFollower {
	tf := &testFollower{}
	tf.follower = &follower{
		client: dialAPI(address, token), pipelineID: "orders", notices: &tf.notices,
		minDelay: 100 * time.Millisecond, maxDelay: 400 * time.Millisecond,
		print: func(e *conduitv1.PipelineEvent) error {
			tf.printed = append(tf.printed, e.GetSequence())
			if e.GetSequence() == stopAt {
				cancel()
			}
			return nil
		},
		sleep: func(ctx context.Context, d time.Duration) error {
			tf.delays = append(tf.delays, d)
			return ctx.Err()
		},
	}
	return tf
}

func TestFollowReconnectsAfterTheLastPrintedEvent(t *testing.T) {
	t.Parallel()
	f := &fakeService{watch: func(ctx context.Context, n int, send func(uint64) error) error {
		switch n {
		case 0:
			if err := sendAll(send, 1, 2, 3); err != nil {
				return err
			}
			return connect.NewError(connect.CodeResourceExhausted, errors.New("audit log watcher fell too far behind"))
		case 1:
			// 3 again: a server bug must not make the client print twice.
			if err := sendAll(send, 3, 4, 5); err != nil {
				return err
			}
			return connect.NewError(connect.CodeUnavailable, errors.New("the server is shutting down"))
		default:
			if err := send(6); err != nil {
				return err
			}
			<-ctx.Done()
			return nil
		}
	}}
	address := serveFake(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tf := newTestFollower(address, "", cancel, 6)

	if err := tf.run(ctx, 0); err != nil {
		t.Fatalf("run: %v", err)
	}
	if !slices.Equal(tf.printed, []uint64{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("printed %v, want 1-6 once each", tf.printed)
	}
	if _, afters := f.seen(); !slices.Equal(afters, []uint64{0, 3, 5}) {
		t.Fatalf("watched after %v, want 0, 3, 5", afters)
	}
	if !slices.Equal(tf.delays, []time.Duration{100 * time.Millisecond, 100 * time.Millisecond}) {
		t.Fatalf("delays %v: a stream that delivered events should reset the backoff", tf.delays)
	}
	for _, want := range []string{
		"conduit: lost the event stream (this reader fell too far behind); reconnecting\n",
		"conduit: reconnected; following after event #3\n",
		"conduit: lost the event stream (the server is shutting down); reconnecting\n",
		"conduit: reconnected; following after event #5\n",
	} {
		if !strings.Contains(tf.notices.String(), want) {
			t.Errorf("notices lack %q:\n%s", want, tf.notices.String())
		}
	}
}

func TestFollowBacksOffWhileTheServerIsAway(t *testing.T) {
	t.Parallel()
	f := &fakeService{
		watch: func(ctx context.Context, n int, send func(uint64) error) error {
			if n == 0 {
				return connect.NewError(connect.CodeUnavailable, errors.New("the server is shutting down"))
			}
			return send(8)
		},
		get: func(n int) error {
			if n < 4 {
				return connect.NewError(connect.CodeUnavailable, errors.New("the server is shutting down"))
			}
			return nil
		},
	}
	address := serveFake(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tf := newTestFollower(address, "", cancel, 8)

	if err := tf.run(ctx, 7); err != nil {
		t.Fatalf("run: %v", err)
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 400 * time.Millisecond, 400 * time.Millisecond}
	if !slices.Equal(tf.delays, want) {
		t.Fatalf("delays %v, want %v", tf.delays, want)
	}
	// The same problem is reported once, not on every attempt.
	if n := strings.Count(tf.notices.String(), "is unavailable"); n != 1 {
		t.Fatalf("%d notices of the same problem:\n%s", n, tf.notices.String())
	}
	if _, afters := f.seen(); !slices.Equal(tf.printed, []uint64{8}) || !slices.Equal(afters, []uint64{7, 7}) {
		t.Fatalf("printed %v, watched after %v", tf.printed, afters)
	}
}

func TestFollowStopsOnErrorsRetriesCannotFix(t *testing.T) {
	t.Parallel()
	f := &fakeService{watch: func(context.Context, int, func(uint64) error) error {
		return connect.NewError(connect.CodeNotFound, errors.New(`pipeline "orders" not found`))
	}}
	address := serveFake(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tf := newTestFollower(address, "", cancel, 0)

	err := tf.run(ctx, 0)
	if err == nil || err.Error() != `pipeline "orders" not found` {
		t.Fatalf("run: %v, want the not found error", err)
	}
	if len(tf.delays) != 0 {
		t.Fatalf("retried %d times", len(tf.delays))
	}
}

func TestTokenIsSentOnCallsAndStreams(t *testing.T) {
	t.Parallel()
	f := &fakeService{watch: func(_ context.Context, _ int, send func(uint64) error) error { return send(1) }}
	address := serveFake(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tf := newTestFollower(address, "s3cret", cancel, 1)
	if _, err := tf.client.GetPipeline(ctx, connect.NewRequest(&conduitv1.GetPipelineRequest{Id: "orders"})); err != nil {
		t.Fatal(err)
	}
	if err := tf.run(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if auth, _ := f.seen(); !slices.Equal(auth, []string{"Bearer s3cret", "Bearer s3cret"}) {
		t.Fatalf("Authorization headers %q", auth)
	}
}

func TestExplain(t *testing.T) {
	t.Parallel()
	c := &apiClient{address: "127.0.0.1:8080"}
	withToken := &apiClient{address: "127.0.0.1:8080", hasToken: true}
	tests := []struct {
		name   string
		client *apiClient
		err    error
		id     string
		want   string
	}{
		{"not found", c, connect.NewError(connect.CodeNotFound, errors.New("whatever")), "x", `pipeline "x" not found`},
		{"no token", c, connect.NewError(connect.CodeUnauthenticated, errors.New("no")), "",
			"the conduit API at 127.0.0.1:8080 requires a token: set it with " + tokenHelp},
		{"wrong token", withToken, connect.NewError(connect.CodeUnauthenticated, errors.New("no")), "",
			"the conduit API at 127.0.0.1:8080 rejected the token: check the one set with " + tokenHelp},
		{"failed precondition", c, connect.NewError(connect.CodeFailedPrecondition, errors.New("cannot start a running pipeline")), "x",
			`pipeline "x": cannot start a running pipeline`},
		{"server shutting down", c, connect.NewError(connect.CodeUnavailable, errors.New("the server is shutting down")), "",
			"the conduit API at 127.0.0.1:8080 is unavailable: the server is shutting down"},
		{"other", c, connect.NewError(connect.CodeInternal, errors.New("disk full")), "", "internal: disk full"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.client.explain(tt.err, tt.id).Error(); got != tt.want {
				t.Fatalf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestUnreachableServerIsOneClearLine(t *testing.T) {
	t.Parallel()
	// A port that was just free: nothing listens there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	address := ln.Addr().String()
	_ = ln.Close()

	c := dialAPI(address, "")
	_, err = c.ListPipelines(context.Background(), connect.NewRequest(&conduitv1.ListPipelinesRequest{}))
	want := "cannot reach the conduit API at " + address + " (is it running? start it with: conduit run)"
	if got := c.explain(err, "").Error(); got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

func TestDialableAddress(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"127.0.0.1:8080": "127.0.0.1:8080",
		":8080":          "127.0.0.1:8080",
		"0.0.0.0:9000":   "127.0.0.1:9000",
		"[::]:8080":      "[::1]:8080",
		"conduit:8080":   "conduit:8080",
	} {
		if got := dialableAddress(in); got != want {
			t.Errorf("dialableAddress(%q) = %q, want %q", in, got, want)
		}
	}
}

// --all follows every pipeline, live: it takes no id, needs --follow and
// refuses the flags that name events of one pipeline.
func TestEventsAllArguments(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--all"}, "--all needs --follow"},
		{[]string{"--all", "-f", "orders"}, "give no pipeline id"},
		{[]string{"--all", "-f", "--after", "3"}, "--after and --limit"},
		{[]string{"--all", "-f", "--limit", "3"}, "--after and --limit"},
		{[]string{}, "want one pipeline id"},
	} {
		cmd := newPipelinesEventsCommand()
		cmd.SetArgs(tt.args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("events %v: %v, want an error saying %q", tt.args, err, tt.want)
		}
	}
}

// A watch refused because the server has as many open as it allows says
// so, rather than that the reader fell behind.
func TestStreamProblemTellsARefusalFromFallingBehind(t *testing.T) {
	for _, tc := range []struct{ name, message, want string }{
		{"fell behind", "audit log watcher fell too far behind", "this reader fell too far behind"},
		{"too many watches", "256 event watches are open, the most this server allows (api.max-watchers); close one or try again later",
			"256 event watches are open, the most this server allows (api.max-watchers); close one or try again later"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := streamProblem(connect.NewError(connect.CodeResourceExhausted, errors.New(tc.message))); got != tc.want {
				t.Fatalf("streamProblem = %q, want %q", got, tc.want)
			}
		})
	}
}
