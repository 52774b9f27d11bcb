package store

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"go.uber.org/zap"
)

// BenchmarkUnsyncedWriteWait is one destination's dedup intent on Badger:
// an Unsynced write submitted and waited for, one at a time, as a CDC row
// waits for its intent before its line is written. What it measures is
// the intent's latency, hand-offs included.
func BenchmarkUnsyncedWriteWait(b *testing.B) {
	b.Run("busy", func(b *testing.B) { benchmarkUnsyncedWriteWait(b, 0) })
	// A CDC row comes alone, after the process went idle: the goroutines
	// involved are parked and each hand-off wakes one.
	b.Run("after-idle", func(b *testing.B) { benchmarkUnsyncedWriteWait(b, time.Millisecond) })
}

func benchmarkUnsyncedWriteWait(b *testing.B, idle time.Duration) {
	ctx := context.Background()
	s, err := OpenBadger(ctx, b.TempDir(), zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	w := NewBatcher(s, nil)
	defer w.Close()
	value := make([]byte, 40)
	i := uint64(0)
	for b.Loop() {
		if idle > 0 {
			b.StopTimer()
			time.Sleep(idle)
			b.StartTimer()
		}
		i++
		key := binary.BigEndian.AppendUint64([]byte(PrefixDedup+"p/d/"), i)
		p, err := w.Submit(WriteOptions{Priority: Urgent, Durability: Unsynced}, Op{Key: key, Value: value})
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
