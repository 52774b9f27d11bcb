package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

func TestInMemoryAcceptance(t *testing.T) {
	runStoreAcceptance(t, func(t *testing.T) Store {
		s := NewInMemory()
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func TestBadgerAcceptance(t *testing.T) {
	runStoreAcceptance(t, func(t *testing.T) Store {
		return openTestBadger(t, t.TempDir())
	})
}

// openTestBadger opens a Badger store at dir that is closed when the test ends.
func openTestBadger(t testing.TB, dir string) *Badger {
	t.Helper()
	s, err := OpenBadger(context.Background(), dir, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	if err != nil {
		t.Fatalf("OpenBadger: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// runStoreAcceptance is the contract of Store, run against every
// implementation so they cannot drift apart. open returns a fresh, empty
// store that is closed when the test ends.
func runStoreAcceptance(t *testing.T, open func(t *testing.T) Store) {
	ctx := context.Background()

	t.Run("get missing key returns ErrNotFound", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		_, err := s.Get(ctx, []byte("missing"))
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get: got %v, want ErrNotFound", err)
		}
	})

	t.Run("set then get", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		mustSet(t, s, "k", "v")
		wantValue(t, s, "k", "v")
	})

	t.Run("set overwrites", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		mustSet(t, s, "k", "v1")
		mustSet(t, s, "k", "v2")
		wantValue(t, s, "k", "v2")
	})

	t.Run("empty value is found and empty", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		for _, v := range [][]byte{nil, {}} {
			if err := put(ctx, s, []byte("k"), v); err != nil {
				t.Fatalf("Set: %v", err)
			}
			got, err := s.Get(ctx, []byte("k"))
			if err != nil || got == nil || len(got) != 0 {
				t.Fatalf("Get: got %q (nil %v), %v; want empty non-nil value", got, got == nil, err)
			}
		}
	})

	t.Run("empty key is rejected", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		if _, err := s.Get(ctx, nil); !errors.Is(err, errEmptyKey) {
			t.Errorf("Get: got %v, want errEmptyKey", err)
		}
		if err := put(ctx, s, []byte{}, []byte("v")); !errors.Is(err, errEmptyKey) {
			t.Errorf("Commit of a set: got %v, want errEmptyKey", err)
		}
		if err := del(ctx, s, nil); !errors.Is(err, errEmptyKey) {
			t.Errorf("Commit of a delete: got %v, want errEmptyKey", err)
		}
	})

	t.Run("delete removes the key", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		mustSet(t, s, "k", "v")
		if err := del(ctx, s, []byte("k")); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		wantMissing(t, s, "k")
	})

	t.Run("delete missing key is not an error", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		if err := del(ctx, s, []byte("missing")); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	})

	t.Run("scan visits the prefix in key order", func(t *testing.T) {
		t.Parallel()
		tests := []struct {
			name   string
			keys   []string
			prefix string
			want   []string
		}{
			{
				name: "boundaries",
				// "a." sorts just before "a/", "a0" just after every "a/...".
				keys:   []string{"a", "a.", "a/", "a/1", "a/10", "a/2", "a/\xff", "a0", "b"},
				prefix: "a/",
				want:   []string{"a/", "a/1", "a/10", "a/2", "a/\xff"},
			},
			{
				name: "prefix ending in 0xff",
				// The prefix has no successor of the same length; "y" must
				// not be mistaken for one.
				keys:   []string{"x\xfe", "x\xff", "x\xff\x00", "x\xff\xff", "y"},
				prefix: "x\xff",
				want:   []string{"x\xff", "x\xff\x00", "x\xff\xff"},
			},
			{
				name:   "empty prefix visits everything",
				keys:   []string{"c", "a", "b"},
				prefix: "",
				want:   []string{"a", "b", "c"},
			},
			{
				name:   "no match",
				keys:   []string{"a", "c"},
				prefix: "b",
				want:   nil,
			},
			{
				name:   "store prefixes do not overlap",
				keys:   []string{PrefixAuditLog + "p1/1", PrefixDedup + "p1/d1/x", PrefixPosition + "p1/s1", PrefixPipelineState + "p1"},
				prefix: PrefixPosition,
				want:   []string{PrefixPosition + "p1/s1"},
			},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				s := open(t)
				for _, k := range tt.keys {
					mustSet(t, s, k, "v:"+k)
				}
				var got []string
				err := s.Scan(ctx, []byte(tt.prefix), func(key, value []byte) error {
					if string(value) != "v:"+string(key) {
						t.Errorf("key %q: got value %q", key, value)
					}
					got = append(got, string(key))
					return nil
				})
				if err != nil {
					t.Fatalf("Scan: %v", err)
				}
				if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tt.want) {
					t.Fatalf("Scan: got keys %q, want %q", got, tt.want)
				}
			})
		}
	})

	t.Run("scans that span several pages", func(t *testing.T) {
		t.Parallel()
		// More keys than a backend reads per query, so that scans
		// continue across pages, with keys beside the prefix on both
		// sides.
		s := open(t)
		const n = 2500
		keys := make([]string, n)
		var batch []Op
		for i := range n {
			keys[i] = fmt.Sprintf("m/%05d", i)
			batch = append(batch, Op{Key: []byte(keys[i]), Value: []byte("v")})
		}
		batch = append(batch, Op{Key: []byte("l"), Value: []byte("v")}, Op{Key: []byte("n"), Value: []byte("v")})
		if err := s.Commit(ctx, batch); err != nil {
			t.Fatal(err)
		}
		collect := func(scan func(fn func(k, v []byte) error) error) []string {
			t.Helper()
			var got []string
			if err := scan(func(k, _ []byte) error { got = append(got, string(k)); return nil }); err != nil {
				t.Fatal(err)
			}
			return got
		}
		reversed := slices.Clone(keys)
		slices.Reverse(reversed)
		for name, tt := range map[string]struct {
			scan func(fn func(k, v []byte) error) error
			want []string
		}{
			"scan":      {func(fn func(k, v []byte) error) error { return s.Scan(ctx, []byte("m/"), fn) }, keys},
			"scan from": {func(fn func(k, v []byte) error) error { return s.ScanFrom(ctx, []byte("m/"), []byte(keys[700]), fn) }, keys[700:]},
			"reverse":   {func(fn func(k, v []byte) error) error { return s.ScanReverse(ctx, []byte("m/"), nil, fn) }, reversed},
			"reverse from": {func(fn func(k, v []byte) error) error {
				return s.ScanReverse(ctx, []byte("m/"), []byte(keys[1800]), fn)
			}, reversed[n-1801:]},
		} {
			if got := collect(tt.scan); !slices.Equal(got, tt.want) {
				t.Errorf("%s: %d keys (first %q), want %d (first %q)", name, len(got), first(got), len(tt.want), first(tt.want))
			}
		}
	})

	t.Run("scan from and reverse scan", func(t *testing.T) {
		t.Parallel()
		// "a." sorts just before "a/", "a0" just after every "a/...".
		keys := []string{"a", "a.", "a/", "a/1", "a/10", "a/2", "a/\xff", "a0", "b"}
		tests := []struct {
			name    string
			keys    []string
			prefix  string
			start   string
			reverse bool
			want    []string
		}{
			{name: "from the prefix's first key", keys: keys, prefix: "a/", start: "a/",
				want: []string{"a/", "a/1", "a/10", "a/2", "a/\xff"}},
			{name: "from inside the range", keys: keys, prefix: "a/", start: "a/10",
				want: []string{"a/10", "a/2", "a/\xff"}},
			{name: "from between two keys", keys: keys, prefix: "a/", start: "a/11",
				want: []string{"a/2", "a/\xff"}},
			{name: "start below the prefix scans it all", keys: keys, prefix: "a/", start: "a",
				want: []string{"a/", "a/1", "a/10", "a/2", "a/\xff"}},
			{name: "empty start scans it all", keys: keys, prefix: "a/", start: "",
				want: []string{"a/", "a/1", "a/10", "a/2", "a/\xff"}},
			{name: "start above the prefix visits nothing", keys: keys, prefix: "a/", start: "a0",
				want: nil},
			{name: "from the last key", keys: keys, prefix: "a/", start: "a/\xff",
				want: []string{"a/\xff"}},
			{name: "reverse from the end", keys: keys, prefix: "a/", reverse: true,
				want: []string{"a/\xff", "a/2", "a/10", "a/1", "a/"}},
			{name: "reverse from inside the range", keys: keys, prefix: "a/", start: "a/10", reverse: true,
				want: []string{"a/10", "a/1", "a/"}},
			{name: "reverse from between two keys", keys: keys, prefix: "a/", start: "a/11", reverse: true,
				want: []string{"a/10", "a/1", "a/"}},
			{name: "reverse from above the prefix scans it all", keys: keys, prefix: "a/", start: "b", reverse: true,
				want: []string{"a/\xff", "a/2", "a/10", "a/1", "a/"}},
			{name: "reverse from below the prefix visits nothing", keys: keys, prefix: "a/", start: "a.", reverse: true,
				want: nil},
			{name: "reverse skips the key right after the prefix", keys: []string{"a/1", "a0", "a00"}, prefix: "a/", reverse: true,
				want: []string{"a/1"}},
			{name: "reverse with a prefix of 0xff bytes", keys: []string{"x\xfe", "x\xff", "x\xff\x00", "x\xff\xff", "y"}, prefix: "x\xff", reverse: true,
				want: []string{"x\xff\xff", "x\xff\x00", "x\xff"}},
			{name: "reverse with a prefix of only 0xff bytes", keys: []string{"a", "\xff", "\xff\xff"}, prefix: "\xff", reverse: true,
				want: []string{"\xff\xff", "\xff"}},
			{name: "reverse with an empty prefix", keys: []string{"c", "a", "b"}, prefix: "", reverse: true,
				want: []string{"c", "b", "a"}},
			{name: "reverse with no match", keys: []string{"a", "c"}, prefix: "b", reverse: true,
				want: nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				s := open(t)
				for _, k := range tt.keys {
					mustSet(t, s, k, "v:"+k)
				}
				var got []string
				fn := func(key, value []byte) error {
					if string(value) != "v:"+string(key) {
						t.Errorf("key %q: got value %q", key, value)
					}
					got = append(got, string(key))
					return nil
				}
				scan := s.ScanFrom
				if tt.reverse {
					scan = s.ScanReverse
				}
				if err := scan(ctx, []byte(tt.prefix), []byte(tt.start), fn); err != nil {
					t.Fatalf("scan: %v", err)
				}
				if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tt.want) {
					t.Fatalf("got keys %q, want %q", got, tt.want)
				}
			})
		}
	})

	t.Run("scan from and reverse scan stop at the callback's error", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		for _, k := range []string{"p/1", "p/2", "p/3"} {
			mustSet(t, s, k, "v")
		}
		errStop := errors.New("stop here")
		for name, scan := range map[string]func(context.Context, []byte, []byte, func(k, v []byte) error) error{
			"ScanFrom": s.ScanFrom, "ScanReverse": s.ScanReverse,
		} {
			var seen []string
			err := scan(ctx, []byte("p/"), nil, func(key, _ []byte) error {
				seen = append(seen, string(key))
				return errStop
			})
			if err != errStop || len(seen) != 1 {
				t.Errorf("%s: got %v after %q, want the callback's error after one key", name, err, seen)
			}
		}
	})

	t.Run("scan stops at the callback's error and returns it", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		for _, k := range []string{"p/1", "p/2", "p/3"} {
			mustSet(t, s, k, "v")
		}
		errStop := errors.New("stop here")
		calls := 0
		err := s.Scan(ctx, []byte("p/"), func(key, _ []byte) error {
			calls++
			if string(key) == "p/2" {
				return errStop
			}
			return nil
		})
		if err != errStop {
			t.Fatalf("Scan: got %v, want the callback's error itself", err)
		}
		if calls != 2 {
			t.Fatalf("callback ran %d times, want 2", calls)
		}
	})

	t.Run("scan callback may write to the store and sees a snapshot", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		for _, k := range []string{"p/1", "p/2", "p/3"} {
			mustSet(t, s, k, "v")
		}
		var seen []string
		err := s.Scan(ctx, []byte("p/"), func(key, _ []byte) error {
			seen = append(seen, string(key))
			if err := del(ctx, s, key); err != nil {
				return err
			}
			return put(ctx, s, []byte("p/9-"+string(key)), []byte("new"))
		})
		if err != nil {
			t.Fatalf("Scan: %v", err)
		}
		if fmt.Sprint(seen) != "[p/1 p/2 p/3]" {
			t.Fatalf("Scan saw %v, want the keys present when it started", seen)
		}
		wantMissing(t, s, "p/1")
		wantValue(t, s, "p/9-p/1", "new")
	})

	t.Run("commit applies sets and deletes together, in order", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		mustSet(t, s, "gone", "x")
		err := s.Commit(ctx, []Op{
			{Key: []byte("a"), Value: []byte("1")},
			{Key: []byte("gone"), Delete: true},
			{Key: []byte("a"), Value: []byte("2")},
			{Key: []byte("b"), Value: []byte("3")},
			{Key: []byte("b"), Delete: true},
		})
		if err != nil {
			t.Fatal(err)
		}
		wantValue(t, s, "a", "2")
		for _, k := range []string{"gone", "b"} {
			if _, err := s.Get(ctx, []byte(k)); !errors.Is(err, ErrNotFound) {
				t.Fatalf("%s: %v, want ErrNotFound", k, err)
			}
		}
	})

	t.Run("commit with an empty key writes nothing", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		err := s.Commit(ctx, []Op{{Key: []byte("a"), Value: []byte("1")}, {Key: nil, Value: []byte("2")}})
		if err == nil {
			t.Fatal("Commit with an empty key returned nil")
		}
		if _, err := s.Get(ctx, []byte("a")); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a was written: %v", err)
		}
	})

	t.Run("values up to MaxValueBytes are kept, longer ones refused and nothing of their commit written", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		longest := bytes.Repeat([]byte{'v'}, MaxValueBytes)
		if err := s.Commit(ctx, []Op{{Key: []byte("longest"), Value: longest}}); err != nil {
			t.Fatalf("Commit of a %d-byte value: %v", len(longest), err)
		}
		if got, err := s.Get(ctx, []byte("longest")); err != nil || !bytes.Equal(got, longest) {
			t.Fatalf("Get of the longest value: %d bytes, %v", len(got), err)
		}
		err := s.Commit(ctx, []Op{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("too-long"), Value: append(longest, 'v')}})
		if !errors.Is(err, ErrValueTooLarge) {
			t.Fatalf("Commit of a value over MaxValueBytes: got %v, want ErrValueTooLarge", err)
		}
		if !strings.Contains(err.Error(), `"too-long"`) || !strings.Contains(err.Error(), "1048576 bytes") {
			t.Errorf("the error does not name the key and the size: %v", err)
		}
		wantMissing(t, s, "a")
		wantMissing(t, s, "too-long")
	})

	t.Run("a batcher writes through commit", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		b := NewBatcher(s, nil)
		defer b.Close()
		if err := b.Apply(ctx, Op{Key: []byte("a"), Value: []byte("1")}, Op{Key: []byte("b"), Encode: func(dst []byte) ([]byte, error) { return append(dst, "2"...), nil }}); err != nil {
			t.Fatal(err)
		}
		wantValue(t, s, "a", "1")
		wantValue(t, s, "b", "2")
		p, err := b.Submit(WriteOptions{Priority: Urgent}, Op{Key: []byte("a"), Delete: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, []byte("a")); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a: %v, want ErrNotFound", err)
		}
	})

	t.Run("commit with expects writes only when every key holds what is expected", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		mustSet(t, s, "counter", "1")
		mustSet(t, s, "empty", "")
		err := s.Commit(ctx, []Op{
			{Key: []byte("counter"), Value: []byte("2"), Expect: &Expect{Value: []byte("1")}},
			{Key: []byte("new"), Value: []byte("v"), Expect: &Expect{Absent: true}},
			{Key: []byte("empty"), Delete: true, Expect: &Expect{Value: []byte{}}},
			{Key: []byte("plain"), Value: []byte("p")},
		})
		if err != nil {
			t.Fatalf("Commit with expects that hold: %v", err)
		}
		wantValue(t, s, "counter", "2")
		wantValue(t, s, "new", "v")
		wantMissing(t, s, "empty")
		wantValue(t, s, "plain", "p")

		for _, tt := range []struct {
			name   string
			expect Op
		}{
			{"a stale value", Op{Key: []byte("counter"), Value: []byte("3"), Expect: &Expect{Value: []byte("1")}}},
			{"a key expected absent that is there", Op{Key: []byte("new"), Value: []byte("w"), Expect: &Expect{Absent: true}}},
			{"a key expected present that is not", Op{Key: []byte("empty"), Value: []byte("w"), Expect: &Expect{Value: []byte{}}}},
		} {
			err := s.Commit(ctx, []Op{{Key: []byte("other"), Value: []byte("o")}, tt.expect})
			if !errors.Is(err, ErrConflict) {
				t.Errorf("%s: Commit = %v, want ErrConflict", tt.name, err)
			}
		}
		wantValue(t, s, "counter", "2")
		wantValue(t, s, "new", "v")
		wantMissing(t, s, "empty")
		wantMissing(t, s, "other")
	})

	t.Run("a batcher refuses an op with an expect", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		b := NewBatcher(s, nil)
		defer b.Close()
		err := b.Apply(ctx, Op{Key: []byte("a"), Value: []byte("1"), Expect: &Expect{Absent: true}})
		if !errors.Is(err, errExpectInBatcher) {
			t.Fatalf("Apply = %v, want errExpectInBatcher", err)
		}
		wantMissing(t, s, "a")
	})

	t.Run("values are copies", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		key, val := []byte("k"), []byte("value")
		if err := put(ctx, s, key, val); err != nil {
			t.Fatal(err)
		}
		key[0], val[0] = 'X', 'X'
		wantValue(t, s, "k", "value")

		got, err := s.Get(ctx, []byte("k"))
		if err != nil {
			t.Fatal(err)
		}
		got[0] = 'Y'
		wantValue(t, s, "k", "value")

		// Reuse the buffers of one commit for the next, as a batching
		// caller would.
		buf, v := []byte("txkey"), []byte("first")
		if err := s.Commit(ctx, []Op{{Key: buf, Value: v}}); err != nil {
			t.Fatal(err)
		}
		copy(buf, "txkez")
		copy(v, "again")
		if err := s.Commit(ctx, []Op{{Key: buf, Value: v}}); err != nil {
			t.Fatal(err)
		}
		v[0] = 'X'
		wantValue(t, s, "txkey", "first")
		wantValue(t, s, "txkez", "again")
	})

	t.Run("concurrent writers", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		const writers, perWriter = 8, 10
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			wg.Go(func() {
				for i := range perWriter {
					key := fmt.Appendf(nil, "w/%d/%02d", w, i)
					if err := put(ctx, s, key, key); err != nil {
						errs <- err
						return
					}
					// A read-modify-write of one hot key: no increment may
					// be lost.
					if err := increment(ctx, s, []byte("counter")); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		wantValue(t, s, "counter", strconv.Itoa(writers*perWriter))
		n := 0
		err := s.Scan(ctx, []byte("w/"), func(key, value []byte) error {
			if !bytes.Equal(key, value) {
				t.Errorf("key %q has value %q", key, value)
			}
			n++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n != writers*perWriter {
			t.Fatalf("scan found %d keys, want %d", n, writers*perWriter)
		}
	})

	t.Run("close twice and concurrently", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		mustSet(t, s, "k", "v")
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Go(func() { errs <- s.Close() })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("Close: %v", err)
			}
		}
		if err := s.Close(); err != nil {
			t.Errorf("Close again: %v", err)
		}
	})

	t.Run("operations after close return ErrClosed", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		wantErr(t, s, ErrClosed)
	})

	t.Run("close while writing", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		var wg sync.WaitGroup
		started := make(chan struct{}, 4)
		errs := make(chan error, 4)
		for w := range 4 {
			wg.Go(func() {
				for i := 0; ; i++ {
					err := put(ctx, s, fmt.Appendf(nil, "%d/%d", w, i), []byte("v"))
					if i == 0 {
						started <- struct{}{}
					}
					if errors.Is(err, ErrClosed) {
						return
					}
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		for range 4 {
			<-started
		}
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("Set during Close: got %v, want nil or ErrClosed", err)
		}
	})

	t.Run("cancelled context", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		mustSet(t, s, "k", "v")
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		wantErrCtx(t, s, cctx, context.Canceled)
		wantValue(t, s, "k", "v")
	})

	t.Run("context cancelled during scan", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		for _, k := range []string{"p/1", "p/2", "p/3"} {
			mustSet(t, s, k, "v")
		}
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		calls := 0
		err := s.Scan(cctx, []byte("p/"), func(_, _ []byte) error {
			calls++
			cancel()
			return nil
		})
		if !errors.Is(err, context.Canceled) || calls != 1 {
			t.Fatalf("Scan: got %v after %d calls, want context.Canceled after 1", err, calls)
		}
	})
}

func mustSet(t *testing.T, s Store, key, value string) {
	t.Helper()
	if err := put(context.Background(), s, []byte(key), []byte(value)); err != nil {
		t.Fatalf("Set %q: %v", key, err)
	}
}

func wantValue(t *testing.T, s Store, key, want string) {
	t.Helper()
	got, err := s.Get(context.Background(), []byte(key))
	if err != nil {
		t.Fatalf("Get %q: %v", key, err)
	}
	if string(got) != want {
		t.Fatalf("Get %q: got %q, want %q", key, got, want)
	}
}

func wantMissing(t *testing.T, s Store, key string) {
	t.Helper()
	if v, err := s.Get(context.Background(), []byte(key)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get %q: got %q, %v; want ErrNotFound", key, v, err)
	}
}

// wantErr checks that every operation fails with want.
func wantErr(t *testing.T, s Store, want error) {
	t.Helper()
	wantErrCtx(t, s, context.Background(), want)
}

func wantErrCtx(t *testing.T, s Store, ctx context.Context, want error) {
	t.Helper()
	called := false
	ops := []struct {
		name string
		err  error
	}{
		{"Get", func() error { _, err := s.Get(ctx, []byte("k")); return err }()},
		{"Commit", s.Commit(ctx, []Op{{Key: []byte("k"), Value: []byte("new")}})},
		{"Scan", s.Scan(ctx, nil, func(_, _ []byte) error { called = true; return nil })},
		{"ScanFrom", s.ScanFrom(ctx, nil, nil, func(_, _ []byte) error { called = true; return nil })},
		{"ScanReverse", s.ScanReverse(ctx, nil, nil, func(_, _ []byte) error { called = true; return nil })},
	}
	for _, op := range ops {
		if !errors.Is(op.err, want) {
			t.Errorf("%s: got %v, want %v", op.name, op.err, want)
		}
	}
	if called {
		t.Errorf("a callback ran, want none")
	}
}

func first(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	return keys[0]
}

// put writes one key with Commit, as Set did before Commit was the one
// write.
func put(ctx context.Context, s Store, key, value []byte) error {
	return s.Commit(ctx, []Op{{Key: key, Value: value}})
}

// del removes one key with Commit.
func del(ctx context.Context, s Store, key []byte) error {
	return s.Commit(ctx, []Op{{Key: key, Delete: true}})
}

// increment adds one to the decimal counter under key, reading it and
// committing the next value with an Expect until no other writer came
// between the two.
func increment(ctx context.Context, s Store, key []byte) error {
	for {
		op := Op{Key: key, Expect: &Expect{}}
		n := 0
		v, err := s.Get(ctx, key)
		switch {
		case errors.Is(err, ErrNotFound):
			op.Expect.Absent = true
		case err != nil:
			return err
		default:
			if n, err = strconv.Atoi(string(v)); err != nil {
				return err
			}
			op.Expect.Value = v
		}
		op.Value = strconv.AppendInt(nil, int64(n+1), 10)
		err = s.Commit(ctx, []Op{op})
		if !errors.Is(err, ErrConflict) {
			return err
		}
	}
}
