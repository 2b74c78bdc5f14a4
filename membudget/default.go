package membudget

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// DefaultFraction is the share of the machine's memory (or the cgroup's
// limit, when lower) that Default budgets: the rest is left to what no
// holder counts (the Go runtime, decoded parts in flight, the page cache
// the process reads blobs through) and to the garbage collector's headroom.
const DefaultFraction = 0.5

// Default is the budget when --memory-budget is not set: DefaultFraction
// of the lower of the cgroup v2 memory.max (or v1 limit_in_bytes) and the
// machine's MemTotal; 0 (unlimited) when neither can be read.
func Default() int64 {
	total := memTotal()
	if c := cgroupLimit(); c > 0 && (total == 0 || c < total) {
		total = c
	}
	return int64(float64(total) * DefaultFraction)
}

// memTotal reads MemTotal from /proc/meminfo; 0 if unavailable.
func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			fields := strings.Fields(rest)
			if len(fields) == 2 && fields[1] == "kB" {
				kb, err := strconv.ParseInt(fields[0], 10, 64)
				if err == nil {
					return kb << 10
				}
			}
		}
	}
	return 0
}

// cgroupLimit reads the process's cgroup memory limit; 0 when there is
// none ("max", or a v1 figure near the maximum int64) or it cannot be read.
func cgroupLimit() int64 {
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		s := string(bytes.TrimSpace(data))
		if s == "max" {
			return 0
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 || n >= 1<<62 {
			return 0
		}
		return n
	}
	return 0
}

// ParseSize parses a size in bytes: a number with an optional suffix B,
// KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000),
// e.g. "256MiB". "0" means unlimited.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}} {
		if rest, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || !(n >= 0) || n*float64(mult) >= 1<<63 { // !(n >= 0): NaN too
		return 0, fmt.Errorf("invalid size %q: want bytes, e.g. 268435456 or 256MiB", s)
	}
	return int64(n * float64(mult)), nil
}

// FormatSize renders n bytes the way ParseSize reads them, in the largest
// binary unit that divides it.
func FormatSize(n int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// RuntimeHeadroom is how far above the budget ApplyRuntimeLimit sets the Go
// runtime's soft memory limit: room for what no holder counts (decoded
// parts in flight, goroutine stacks, the runtime's own, garbage). Under
// pressure the process's anonymous memory sits at that limit, and its RSS
// is that plus the binary's resident pages (35 MiB in the (g) bench), so
// 96 MiB keeps RSS within the budget + 150 MiB. (At 128 MiB, with every
// holder counted and held at the budget, a (g) run's RSS was the budget +
// 169 MiB: 384 MiB anonymous, 35 MiB file.)
const RuntimeHeadroom = 96 << 20

// ApplyRuntimeLimit sets the Go runtime's soft memory limit to budget +
// RuntimeHeadroom, so that the garbage collector works harder as the heap
// nears it instead of letting garbage double the heap (GOGC), unless the
// operator set GOMEMLIMIT. It returns the limit set, 0 if none (an
// unlimited budget, or GOMEMLIMIT set).
func ApplyRuntimeLimit(budget int64) int64 {
	if budget <= 0 || os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	limit := budget + RuntimeHeadroom
	debug.SetMemoryLimit(limit)
	return limit
}
