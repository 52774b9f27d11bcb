package pipeline

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"

	"github.com/conduitry/conduit/pkg/record"
	"github.com/conduitry/conduit/pkg/store"
)

// seqSource produces records 1..limit (positions "1", "2", ...), at most
// perRead per Read, and then blocks until its context is done. It records
// every Ack call.
type seqSource struct {
	limit   int
	perRead int
	readErr error // returned once next reaches failAt
	failAt  int
	ackErr  error
	// ackGate, when set, is received from before every Ack returns, so a
	// test decides when the source has acknowledged.
	ackGate chan struct{}

	mu       sync.Mutex
	next     int
	openedAt record.Position
	acks     [][]string
	torn     bool
}

func (s *seqSource) Open(_ context.Context, pos record.Position) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.openedAt = slices.Clone(pos)
	s.next = 1
	if pos != nil {
		n, err := strconv.Atoi(string(pos))
		if err != nil {
			return err
		}
		s.next = n + 1
	}
	return nil
}

func (s *seqSource) Read(ctx context.Context, batch []record.Record) (int, error) {
	s.mu.Lock()
	if s.readErr != nil && s.next >= s.failAt {
		s.mu.Unlock()
		return 0, s.readErr
	}
	if s.next > s.limit {
		s.mu.Unlock()
		<-ctx.Done()
		return 0, ctx.Err()
	}
	n := 0
	for n < len(batch) && n < s.perRead && s.next <= s.limit {
		batch[n] = record.Record{
			Position:  record.Position(strconv.Itoa(s.next)),
			Operation: record.OperationCreate,
			Payload:   record.Change{After: record.RawData(strconv.Itoa(s.next))},
		}
		s.next++
		n++
	}
	s.mu.Unlock()
	return n, nil
}

func (s *seqSource) Ack(_ context.Context, positions []record.Position) error {
	if s.ackErr != nil {
		return s.ackErr
	}
	got := make([]string, len(positions))
	for i, p := range positions {
		got[i] = string(p)
	}
	s.mu.Lock()
	s.acks = append(s.acks, got)
	s.mu.Unlock()
	if s.ackGate != nil {
		<-s.ackGate
	}
	return nil
}

func (s *seqSource) Teardown(context.Context) error {
	s.mu.Lock()
	s.torn = true
	s.mu.Unlock()
	return nil
}

func (s *seqSource) ackedPositions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []string
	for _, a := range s.acks {
		all = append(all, a...)
	}
	return all
}

// memDestination keeps what it was given. gate, when set, is received from
// before every write so a test decides when each write happens. failAtPos
// makes the write fail at the record with that position.
type memDestination struct {
	gate      chan struct{}
	failAtPos string
	failErr   error
	failOnce  bool // fail at failAtPos only the first time

	mu      sync.Mutex
	written []string
	torn    bool
}

func (d *memDestination) Open(context.Context) error { return nil }

func (d *memDestination) Write(ctx context.Context, batch []record.Record) (int, error) {
	if d.gate != nil {
		select {
		case <-d.gate:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, r := range batch {
		if d.failAtPos != "" && string(r.Position) == d.failAtPos {
			if d.failOnce {
				d.failAtPos = ""
			}
			return i, d.failErr
		}
		d.written = append(d.written, string(r.Payload.After.Bytes()))
	}
	return len(batch), nil
}

func (d *memDestination) Teardown(context.Context) error {
	d.mu.Lock()
	d.torn = true
	d.mu.Unlock()
	return nil
}

func (d *memDestination) records() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.written)
}

// memPositions is a Positions in memory. saveGate, when set, holds every
// commit until it is closed, as a slow disk would: saves submitted
// meanwhile coalesce into one commit, as they do in store.Batcher.
type memPositions struct {
	saveGate chan struct{}
	saveErr  error

	mu      sync.Mutex
	pos     map[string]record.Position
	saves   []string // one per commit
	deleted []string // dedup keys deleted with the saves
	queued  []queuedSave
	waiting bool // a goroutine waits for saveGate
}

type queuedSave struct {
	key  string
	pos  record.Position
	with []store.Op
	done func(error)
}

func (m *memPositions) Load(_ context.Context, pipelineID, connectorID string) (record.Position, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pos[pipelineID+"/"+connectorID], nil
}

func (m *memPositions) SaveLater(pipelineID, connectorID string, pos record.Position, with []store.Op, done func(error)) error {
	m.mu.Lock()
	m.queued = append(m.queued, queuedSave{key: pipelineID + "/" + connectorID, pos: bytes.Clone(pos), with: slices.Clone(with), done: done})
	if m.saveGate != nil {
		if !m.waiting {
			m.waiting = true
			go func() {
				<-m.saveGate
				m.mu.Lock()
				m.saveGate, m.waiting = nil, false
				m.mu.Unlock()
				m.commit()
			}()
		}
		m.mu.Unlock()
		return nil
	}
	m.mu.Unlock()
	m.commit()
	return nil
}

// commit writes everything queued as one commit, the newest position of
// each key winning, and reports to every save in order.
func (m *memPositions) commit() {
	m.mu.Lock()
	queued := m.queued
	m.queued = nil
	if len(queued) > 0 && m.saveErr == nil {
		if m.pos == nil {
			m.pos = map[string]record.Position{}
		}
		for _, q := range queued {
			m.pos[q.key] = q.pos
			for _, op := range q.with {
				if op.Delete {
					m.deleted = append(m.deleted, string(op.Key))
				}
			}
		}
		m.saves = append(m.saves, string(queued[len(queued)-1].pos))
	}
	err := m.saveErr
	m.mu.Unlock()
	for _, q := range queued {
		q.done(err)
	}
}

// set stores a position as an earlier run would have.
func (m *memPositions) set(pipelineID, connectorID, pos string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pos == nil {
		m.pos = map[string]record.Position{}
	}
	m.pos[pipelineID+"/"+connectorID] = record.Position(pos)
}

func (m *memPositions) saved(pipelineID, connectorID string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return string(m.pos[pipelineID+"/"+connectorID])
}

func (m *memPositions) saveCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.saves)
}

var errBoom = errors.New("boom")

func seqStrings(from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, strconv.Itoa(i))
	}
	return out
}
