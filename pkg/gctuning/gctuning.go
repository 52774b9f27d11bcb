// Package gctuning applies conduit.yml's Go garbage-collector settings
// (runtime.gc-percent, runtime.gc-headroom and runtime.memory-limit) to
// the process.
//
// Why conduit tunes the collector at all: thousands of pipelines that fail
// and restart together allocate in a burst (new connectors, batches, audit
// events, state), and a collection that starts inside the burst makes every
// allocating goroutine assist its marking. Supervisors whose restart is due
// then wait for the mark to end: in the fault-storm benchmark the late
// restarts were exactly those due during a mark (about 160 ms), and its p99
// restart lateness was 63-300 ms in 12 of 13 runs with Go's default
// (GOGC=100) and 3-42 ms in 64 of 68 runs at 400, where a collection mostly
// misses the restarts. Collecting less often trades memory for that; the
// memory limit keeps the trade bounded, because the collector works harder,
// whatever the percentage, as the heap approaches it.
//
// The percentage is meant for heaps of a few hundred MB at most: a large
// live heap grows by runtime.gc-headroom instead (see Percent), so that a
// source holding large reads in flight does not take five times their
// size.
//
// The GOGC and GOMEMLIMIT environment variables win over the file: operators
// who set them expect them to hold.
package gctuning

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"go.uber.org/zap"
)

// Values of runtime.memory-limit besides a size.
const (
	LimitAuto = "auto" // 90% of the cgroup (container) memory limit, if there is one
	LimitOff  = "off"  // no limit
)

// autoFraction is the share of a container's memory the heap may use under
// LimitAuto; the rest is for stacks, Badger's mmapped tables, the runtime's
// own overhead and whatever else shares the container.
const autoFraction = 0.9

// minLimit rejects limits that leave the runtime nothing to work with (a
// limit typed in the wrong unit, such as "512" meaning MiB).
const minLimit = 64 << 20

// Settings are the two conduit.yml keys.
type Settings struct {
	// GCPercent is runtime.gc-percent: GOGC, the heap growth between
	// collections in percent of the live heap.
	GCPercent int
	// MemoryLimit is runtime.memory-limit: LimitAuto, LimitOff or a size
	// such as 1.5GiB or 800MiB.
	MemoryLimit string
	// Headroom is runtime.gc-headroom: HeadroomOff or a size, the most
	// the heap grows by between collections when GCPercent would let it
	// grow by more (see Percent). Empty is off.
	Headroom string
}

// ParseMemoryLimit checks a runtime.memory-limit value. It returns the limit
// in bytes for a size, 0 for LimitAuto and LimitOff.
func ParseMemoryLimit(s string) (int64, error) {
	switch s {
	case LimitAuto, LimitOff:
		return 0, nil
	}
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return 0, fmt.Errorf("must be %s, %s or a size such as 2GiB or 800MiB, got %q", LimitAuto, LimitOff, s)
	}
	if n < minLimit {
		return 0, fmt.Errorf("must be at least 64MiB, got %q (%s); write the unit, e.g. 512MiB", s, humanize.IBytes(n))
	}
	if n > math.MaxInt64 {
		return 0, fmt.Errorf("is too large: %q", s)
	}
	return int64(n), nil
}

// Applied says what the process runs with and where each value came from,
// for the log line and the benchmark's header.
type Applied struct {
	GCPercent       int
	GCPercentSource string
	// MemoryLimit is 0 for none.
	MemoryLimit       int64
	MemoryLimitSource string
	// Headroom is 0 when the percentage is not adjusted to the live heap
	// (off, or GOGC set in the environment); with HeadroomAuto it is the
	// least the headroom is, and HeadroomAuto is true.
	Headroom     uint64
	HeadroomAuto bool

	stop func()
}

func (a Applied) String() string {
	return fmt.Sprintf("gc-percent %d (%s), headroom %s, memory limit %s (%s)",
		a.GCPercent, a.GCPercentSource, a.headroomText(), limitText(a.MemoryLimit), a.MemoryLimitSource)
}

// Stop ends the adjustment of the percentage to the live heap, if any.
func (a Applied) Stop() {
	if a.stop != nil {
		a.stop()
	}
}

// Apply sets the process's collector from s unless the environment already
// did, and logs the outcome once. The collector is process-wide: call it
// once, at start, before the work it is meant for.
func Apply(s Settings, log *zap.Logger) (Applied, error) {
	return apply(s, host{
		lookupEnv:      os.LookupEnv,
		setGCPercent:   debug.SetGCPercent,
		setMemoryLimit: debug.SetMemoryLimit,
		cgroupLimit:    func() (int64, bool) { return cgroupMemoryLimit("/") },
		liveHeap:       liveHeap,
		goroutines:     runtime.NumGoroutine,
		now:            time.Now,
	}, log)
}

// host is what apply touches outside itself; tests replace it so that they
// do not change the test process's collector.
type host struct {
	lookupEnv      func(string) (string, bool)
	setGCPercent   func(int) int
	setMemoryLimit func(int64) int64
	cgroupLimit    func() (int64, bool)
	liveHeap       func() uint64
	goroutines     func() int
	now            func() time.Time
}

func apply(s Settings, h host, log *zap.Logger) (Applied, error) {
	if s.GCPercent < 1 {
		return Applied{}, fmt.Errorf("runtime.gc-percent must be at least 1, got %d", s.GCPercent)
	}
	limit, err := ParseMemoryLimit(s.MemoryLimit)
	if err != nil {
		return Applied{}, fmt.Errorf("runtime.memory-limit %w", err)
	}
	headroom := uint64(0)
	if s.Headroom != "" {
		if headroom, err = ParseHeadroom(s.Headroom); err != nil {
			return Applied{}, fmt.Errorf("runtime.gc-headroom %w", err)
		}
	}
	var a Applied
	if v, ok := h.lookupEnv("GOGC"); ok && v != "" {
		// The runtime read it at start. Setting a value is the only way to
		// read it back, so this turns collection off for two calls' time.
		a.GCPercent = h.setGCPercent(-1)
		h.setGCPercent(a.GCPercent)
		a.GCPercentSource = "GOGC environment variable"
	} else {
		h.setGCPercent(s.GCPercent)
		a.GCPercent, a.GCPercentSource = s.GCPercent, "runtime.gc-percent"
		if headroom > 0 && s.GCPercent > 100 {
			// An operator's GOGC holds as it is; the file's percentage
			// gives way to the headroom on a large heap.
			a.Headroom = headroom
			fixed, floor := func() uint64 { return headroom }, 100
			if s.Headroom == HeadroomAuto {
				floor = autoFloor
				a.HeadroomAuto = true
				// Only the finalizer goroutine calls it (and apply, before).
				fixed = (&goroutinePeak{count: h.goroutines, now: h.now}).headroom
			}
			a.stop = startTuner(s.GCPercent, floor, fixed, h.setGCPercent, h.liveHeap)
		}
	}

	if v, ok := h.lookupEnv("GOMEMLIMIT"); ok && v != "" {
		a.MemoryLimit = h.setMemoryLimit(-1) // a negative value only reads it
		if a.MemoryLimit == math.MaxInt64 {
			a.MemoryLimit = 0
		}
		a.MemoryLimitSource = "GOMEMLIMIT environment variable"
	} else {
		switch s.MemoryLimit {
		case LimitOff:
			a.MemoryLimitSource = "runtime.memory-limit off"
		case LimitAuto:
			if cg, ok := h.cgroupLimit(); ok {
				a.MemoryLimit = int64(float64(cg) * autoFraction)
				a.MemoryLimitSource = fmt.Sprintf("runtime.memory-limit auto: %.0f%% of the cgroup limit %s",
					autoFraction*100, humanize.IBytes(uint64(cg)))
			} else {
				a.MemoryLimitSource = "runtime.memory-limit auto: no cgroup memory limit found"
			}
		default:
			a.MemoryLimit, a.MemoryLimitSource = limit, "runtime.memory-limit"
		}
		if a.MemoryLimit > 0 {
			h.setMemoryLimit(a.MemoryLimit)
		} else {
			h.setMemoryLimit(math.MaxInt64)
		}
	}
	log.Info("go garbage collector configured", zap.Int("gc_percent", a.GCPercent), zap.String("gc_percent_from", a.GCPercentSource),
		zap.String("gc_headroom", a.headroomText()),
		zap.String("memory_limit", limitText(a.MemoryLimit)), zap.String("memory_limit_from", a.MemoryLimitSource))
	return a, nil
}

func limitText(n int64) string {
	if n <= 0 {
		return "none"
	}
	return humanize.IBytes(uint64(n))
}

// unlimited is where cgroups put "no limit" in practice: v1 reports a page-
// aligned value near MaxInt64, v2 the word "max".
const unlimited = 1 << 62

// cgroupMemoryLimit returns the memory limit of the cgroup this process is
// in, reading the cgroup file systems under root ("/" outside tests), v2
// first. A missing or unreadable file means no limit.
func cgroupMemoryLimit(root string) (int64, bool) {
	membership, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return 0, false
	}
	var v1Path, v2Path string
	for line := range strings.Lines(string(membership)) {
		// hierarchy-id:controllers:path
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2Path = parts[2]
		case hasController(parts[1], "memory"):
			v1Path = parts[2]
		}
	}
	if v1Path != "" {
		// A v1 memory hierarchy is mounted: it is the one in force even when
		// a v2 line exists (hybrid mode).
		for _, p := range []string{filepath.Join("sys/fs/cgroup/memory", v1Path), "sys/fs/cgroup/memory"} {
			if n, ok := readLimit(filepath.Join(root, p, "memory.limit_in_bytes")); ok {
				return n, true
			}
		}
		return 0, false
	}
	if v2Path != "" {
		// Inside a container the namespace root is the container's own
		// cgroup, so the path is "/" and the file is at the top.
		for _, p := range []string{filepath.Join("sys/fs/cgroup", v2Path), "sys/fs/cgroup"} {
			if n, ok := readLimit(filepath.Join(root, p, "memory.max")); ok {
				return n, true
			}
		}
	}
	return 0, false
}

func hasController(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// readLimit reads a cgroup limit file; "max", a missing file and values
// that mean unlimited all report no limit.
func readLimit(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n >= unlimited {
		return 0, false
	}
	return n, true
}

func (a Applied) headroomText() string {
	switch {
	case a.Headroom == 0:
		return HeadroomOff
	case a.HeadroomAuto:
		return "auto (at least " + humanize.IBytes(a.Headroom) + ", 48 KiB per goroutine)"
	}
	return humanize.IBytes(a.Headroom)
}
