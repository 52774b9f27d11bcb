package gctuning

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

func TestParseMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    int64
		wantErr string
	}{
		{in: "auto"},
		{in: "off"},
		{in: "2GiB", want: 2 << 30},
		{in: "1.5GiB", want: 3 << 29},
		{in: "800MiB", want: 800 << 20},
		{in: "64MiB", want: 64 << 20},
		{in: "512", wantErr: "at least 64MiB"},
		{in: "lots", wantErr: `must be auto, off or a size`},
		{in: "", wantErr: `must be auto, off or a size`},
		{in: "-1GiB", wantErr: `must be auto, off or a size`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseMemoryLimit(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseMemoryLimit(%q) = %d, %v; want an error with %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseMemoryLimit(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
		})
	}
}

// fakeHost records what apply set, starting from Go's defaults.
type fakeHost struct {
	env        map[string]string
	gcPercent  int
	limit      int64
	percentSet []int
	limitSet   []int64
	cgroup     int64
	goroutines int
	live       uint64
}

func newFakeHost() *fakeHost {
	return &fakeHost{env: map[string]string{}, gcPercent: 100, limit: math.MaxInt64}
}

func (f *fakeHost) host() host {
	return host{
		lookupEnv: func(k string) (string, bool) { v, ok := f.env[k]; return v, ok },
		setGCPercent: func(p int) int {
			old := f.gcPercent
			f.gcPercent = p
			f.percentSet = append(f.percentSet, p)
			return old
		},
		setMemoryLimit: func(n int64) int64 {
			old := f.limit
			if n >= 0 {
				f.limit = n
				f.limitSet = append(f.limitSet, n)
			}
			return old
		},
		cgroupLimit: func() (int64, bool) { return f.cgroup, f.cgroup > 0 },
		liveHeap: func() uint64 {
			if f.live == 0 {
				return 1 << 20
			}
			return f.live
		},
		goroutines: func() int { return f.goroutines },
		now:        func() time.Time { return time.Unix(0, 0) },
	}
}

func TestApplySetsTheConfiguredValues(t *testing.T) {
	f := newFakeHost()
	f.cgroup = 1 << 30
	a, err := apply(Settings{GCPercent: 400, MemoryLimit: LimitAuto}, f.host(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if f.gcPercent != 400 || a.GCPercent != 400 || a.GCPercentSource != "runtime.gc-percent" {
		t.Errorf("gc percent: process %d, applied %+v; want 400 from runtime.gc-percent", f.gcPercent, a)
	}
	want := int64(float64(f.cgroup) * 0.9)
	if f.limit != want || a.MemoryLimit != want || !strings.Contains(a.MemoryLimitSource, "90% of the cgroup limit 1.0 GiB") {
		t.Errorf("memory limit: process %d, applied %+v; want %d from the cgroup", f.limit, a, want)
	}

	f = newFakeHost()
	a, err = apply(Settings{GCPercent: 150, MemoryLimit: "2GiB"}, f.host(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if f.gcPercent != 150 || f.limit != 2<<30 || a.MemoryLimit != 2<<30 {
		t.Errorf("process gc %d limit %d, applied %+v; want 150 and 2GiB", f.gcPercent, f.limit, a)
	}
	if got := a.String(); got != "gc-percent 150 (runtime.gc-percent), headroom off, memory limit 2.0 GiB (runtime.memory-limit)" {
		t.Errorf("String() = %q", got)
	}
}

func TestApplyWithoutACgroupLimitSetsNone(t *testing.T) {
	for _, limit := range []string{LimitAuto, LimitOff} {
		f := newFakeHost()
		f.limit = 1 << 30 // whatever was there before
		a, err := apply(Settings{GCPercent: 400, MemoryLimit: limit}, f.host(), zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		if f.limit != math.MaxInt64 || a.MemoryLimit != 0 || !strings.Contains(a.String(), "memory limit none") {
			t.Errorf("%s: process limit %d, applied %v; want none", limit, f.limit, a)
		}
	}
}

func TestApplyLeavesTheEnvironmentsSettings(t *testing.T) {
	f := newFakeHost()
	f.env["GOGC"] = "50"
	f.env["GOMEMLIMIT"] = "1GiB"
	f.gcPercent, f.limit = 50, 1<<30 // as the Go runtime read them at start
	a, err := apply(Settings{GCPercent: 400, MemoryLimit: "2GiB"}, f.host(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if f.gcPercent != 50 || f.limit != 1<<30 {
		t.Errorf("the process now has gc percent %d and limit %d; the environment's 50 and 1GiB must stay", f.gcPercent, f.limit)
	}
	if a.GCPercent != 50 || a.GCPercentSource != "GOGC environment variable" ||
		a.MemoryLimit != 1<<30 || a.MemoryLimitSource != "GOMEMLIMIT environment variable" {
		t.Errorf("applied %+v; want the environment's values and names", a)
	}
	if len(f.limitSet) != 0 {
		t.Errorf("the memory limit was set to %v", f.limitSet)
	}
}

func TestApplyRejectsBadSettings(t *testing.T) {
	for _, tc := range []struct {
		s    Settings
		want string
	}{
		{Settings{GCPercent: 0, MemoryLimit: LimitAuto}, "runtime.gc-percent must be at least 1, got 0"},
		{Settings{GCPercent: 100, MemoryLimit: "12"}, "runtime.memory-limit must be at least 64MiB"},
	} {
		f := newFakeHost()
		_, err := apply(tc.s, f.host(), zap.NewNop())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("apply(%+v) = %v; want %q", tc.s, err, tc.want)
		}
		if len(f.percentSet)+len(f.limitSet) != 0 {
			t.Errorf("apply(%+v) changed the collector before failing", tc.s)
		}
	}
}

// writeFiles creates files under root from a path -> content map.
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCgroupMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		files  map[string]string
		want   int64
		wantOK bool
	}{
		{name: "v2 container", files: map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "536870912\n",
		}, want: 512 << 20, wantOK: true},
		{name: "v2 unlimited", files: map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "max\n",
		}},
		{name: "v2 host, nested cgroup", files: map[string]string{
			"proc/self/cgroup": "0::/system.slice/conduit.service\n",
			"sys/fs/cgroup/system.slice/conduit.service/memory.max": "1073741824\n",
		}, want: 1 << 30, wantOK: true},
		{name: "v1 with a limit", files: map[string]string{
			"proc/self/cgroup": "4:memory:/docker/abc\n3:cpu:/docker/abc\n0::/\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "268435456\n",
		}, want: 256 << 20, wantOK: true},
		{name: "v1 unlimited", files: map[string]string{
			"proc/self/cgroup":                           "4:memory:/process_api/x\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
		}},
		{name: "no cgroups", files: map[string]string{}},
		{name: "garbage", files: map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "lots\n",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, root, tc.files)
			got, ok := cgroupMemoryLimit(root)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("cgroupMemoryLimit = %d, %v; want %d, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
