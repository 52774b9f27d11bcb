package notify

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/clocktest"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/store"
)

// receiver is an HTTP server on 127.0.0.1 that records what it gets and
// answers as answer says (nil: 200).
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
	answer func(n int, w http.ResponseWriter, r *http.Request)
}

func newReceiver(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	rc := &receiver{answer: answer}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.bodies = append(rc.bodies, body)
		n := len(rc.bodies)
		rc.mu.Unlock()
		if rc.answer != nil {
			rc.answer(n, w, r)
		}
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) got() [][]byte {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([][]byte(nil), rc.bodies...)
}

// webhooks decodes what a webhook receiver got.
func (rc *receiver) webhooks(t *testing.T) []webhookBody {
	t.Helper()
	var out []webhookBody
	for _, b := range rc.got() {
		var w webhookBody
		if err := json.Unmarshal(b, &w); err != nil {
			t.Fatalf("body %s: %v", b, err)
		}
		out = append(out, w)
	}
	return out
}

// env is a store, its writer, an audit log whose events feed a Notifier,
// and the Notifier.
type env struct {
	t     *testing.T
	db    store.Store
	w     *store.Batcher
	log   *auditlog.Log
	n     *Notifier
	clock *clocktest.Clock
}

func newTarget(name, kind, url string) config.ResolvedTarget {
	t := config.ResolvedTarget{NotificationTarget: config.NotificationTarget{Name: name, Kind: kind}, URL: config.NewSecret(url)}
	if kind == config.NotifyPagerDuty {
		t.RoutingKey = config.NewSecret("test-routing-key")
	}
	return t
}

func newEnv(t *testing.T, db store.Store, opts Options) *env {
	t.Helper()
	e := &env{t: t, db: db, clock: clocktest.NewAt(time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC))}
	if db == nil {
		e.db = store.NewInMemory()
	}
	e.w = store.NewBatcher(e.db, nil)
	opts.DB, opts.Writer, opts.Clock = e.db, e.w, e.clock
	if opts.Client == nil {
		opts.Client = NewClient(5 * time.Second)
	}
	opts.Record = func(ev auditlog.Event) {
		if err := e.log.Record(ev); err != nil {
			t.Errorf("record %s: %v", ev.Kind, err)
		}
	}
	e.n = New(opts)
	var err error
	e.log, err = auditlog.Open(context.Background(), e.db, e.w, auditlog.Options{Now: e.clock.Now, With: e.n.Ops})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.log.Close()
		e.w.Close()
	})
	return e
}

// append writes an audit event the way the supervisor does.
func (e *env) append(pipeline string, kind auditlog.Kind, mod func(*auditlog.Event)) {
	e.t.Helper()
	ev := auditlog.Event{PipelineID: pipeline, Kind: kind, Actor: lifecycle.ActorSystem}
	switch kind {
	case auditlog.KindDegraded:
		ev.StatusBefore, ev.StatusAfter, ev.Reason = "recovering", "degraded", string(lifecycle.ReasonFatal)
		ev.ErrorMessage, ev.ErrorCode, ev.Component = "password authentication failed", 401, "pg-dest"
	case auditlog.KindRecovered:
		ev.StatusBefore, ev.StatusAfter, ev.Reason = "recovering", "running", "record"
	case auditlog.KindRecovering:
		ev.StatusBefore, ev.StatusAfter, ev.Attempt = "running", "recovering", 1
	}
	if mod != nil {
		mod(&ev)
	}
	if _, err := e.log.Append(context.Background(), ev); err != nil {
		e.t.Fatal(err)
	}
}

// deliver runs one delivery pass at the clock's time, as Run does once a
// window or a backoff ends.
func (e *env) deliver() time.Time {
	e.t.Helper()
	return e.n.deliver(context.Background(), e.clock.Now())
}

// outbox counts the entries waiting.
func (e *env) outbox() int {
	e.t.Helper()
	n := 0
	if err := e.w.Flush(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	if err := e.db.Scan(context.Background(), []byte(store.PrefixNotifyOutbox), func(_, _ []byte) error { n++; return nil }); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// events lists a pipeline's events of kind.
func (e *env) events(pipeline string, kind auditlog.Kind) []auditlog.Event {
	e.t.Helper()
	if err := e.log.Flush(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	evs, err := e.log.List(context.Background(), pipeline, auditlog.Query{})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []auditlog.Event
	for _, ev := range evs {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}
