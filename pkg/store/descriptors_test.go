package store

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	cerrors "github.com/conduitry/conduit/errors"
)

// While the process is short of file descriptors, writes are refused with a
// transient error naming the database, before Badger could fail to open a
// file it needs (which would end the process); reads go on, and writes
// resume once descriptors are back.
func TestBadgerWritesRefusedWhileShortOfDescriptors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	disk := newFakeDisk(1 << 40)
	var left atomic.Int64
	left.Store(1000)
	s, err := openBadger(ctx, dir, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)), openConfig{
		freeSpace: disk.freeSpace, now: disk.Now, reserve: testReserve,
		descriptorsLeft: func() (int, error) { return int(left.Load()), nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	mustSet(t, s, "before", "v")

	left.Store(StoreDescriptorReserve - 1)
	disk.Advance(descriptorCheckInterval)
	for _, err := range []error{
		put(ctx, s, []byte("during"), []byte("v")),
		del(ctx, s, []byte("before")),
		s.Commit(ctx, []Op{{Key: []byte("during"), Value: []byte("v"), Expect: &Expect{Absent: true}}}),
		s.Writable(),
	} {
		if !errors.Is(err, ErrNoDescriptors) || !strings.Contains(err.Error(), dir) ||
			cerrors.Classify(err).Class != cerrors.ClassTransient {
			t.Fatalf("write while short of descriptors: %v, want a transient error wrapping ErrNoDescriptors naming %s", err, dir)
		}
	}
	wantValue(t, s, "before", "v")

	left.Store(1000)
	disk.Advance(descriptorCheckInterval)
	mustSet(t, s, "after", "v")
	wantMissing(t, s, "during")
}

// A refusal lasts only as long as the shortage: while writes are refused,
// the descriptors are counted again after descriptorRecheckShort, not after
// the usual interval, so a dip while pipelines open their connectors at once
// holds writes back for milliseconds.
func TestBadgerWritesResumeSoonAfterADescriptorDip(t *testing.T) {
	ctx := context.Background()
	disk := newFakeDisk(1 << 40)
	var left atomic.Int64
	left.Store(1000)
	s, err := openBadger(ctx, t.TempDir(), zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)), openConfig{
		freeSpace: disk.freeSpace, now: disk.Now, reserve: testReserve,
		descriptorsLeft: func() (int, error) { return int(left.Load()), nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	mustSet(t, s, "before", "v")

	left.Store(StoreDescriptorReserve - 2)
	disk.Advance(descriptorCheckInterval)
	if err := s.Writable(); !errors.Is(err, ErrNoDescriptors) {
		t.Fatalf("Writable during the dip: %v, want ErrNoDescriptors", err)
	}
	left.Store(1000)
	disk.Advance(10 * time.Millisecond)
	if err := s.Writable(); err != nil {
		t.Fatalf("Writable 10ms after the dip ended: %v, want nil", err)
	}
}
