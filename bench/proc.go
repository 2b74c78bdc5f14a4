package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of the CPU times in /proc/<pid>/stat. It
// is 100 on every Linux architecture Go supports.
const clockTicks = 100

// RaiseFileLimit raises this process's RLIMIT_NOFILE as far as it can (to
// want, or the hard limit when it may not pass it) so that thousands of
// connections fit. Child processes started afterwards inherit the limit.
// It returns the soft limit in force.
func RaiseFileLimit(want uint64) (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("getrlimit: %w", err)
	}
	if lim.Cur >= want {
		return lim.Cur, nil
	}
	// Root (CAP_SYS_RESOURCE) may raise the hard limit up to fs.nr_open.
	if want > lim.Max {
		up := syscall.Rlimit{Cur: want, Max: want}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &up); err == nil {
			return want, nil
		}
	}
	lim.Cur = min(want, lim.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("setrlimit: %w", err)
	}
	return lim.Cur, nil
}

// ProcCPU returns the CPU seconds (user + system) that process pid has
// used, including its reaped children: PostgreSQL's backends are children
// of the postmaster and their time lands there once they exit.
//
// /proc/<pid>/stat counts in clock ticks (10 ms: 8 % of the 0.12 s a
// storm of 256 clients costs the server), so the process's own time is
// its live threads' to the nanosecond (/proc/<pid>/task/*/schedstat),
// unless stat's is the larger by more than its rounding: threads have
// exited, and only stat still counts their time.
func ProcCPU(pid int) (float64, error) {
	t, err := procStatTimes(pid, statUtime, statStime, statCutime, statCstime)
	if err != nil {
		return 0, err
	}
	children := t[2] + t[3]
	stat := t[0] + t[1] + children
	threads, err := procThreadsCPU(pid)
	if err != nil || children+threads < stat-2.0/clockTicks {
		return stat, nil
	}
	return children + threads, nil
}

// procThreadsCPU returns the CPU seconds of process pid's live threads,
// from the first field of each one's /proc/<pid>/task/<tid>/schedstat
// (nanoseconds on a CPU). A thread that ends meanwhile is left out.
func procThreadsCPU(pid int) (float64, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var ns int64
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if err != nil {
			continue
		}
		f, _, _ := bytes.Cut(b, []byte(" "))
		v, err := strconv.ParseInt(string(f), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s/%s/schedstat: %w", dir, t.Name(), err)
		}
		ns += v
	}
	return float64(ns) / 1e9, nil
}

// ProcSysCPU returns what of ProcCPU process pid spent in the kernel
// (system time): on loopback that includes the receiving side's TCP
// processing of what it sends.
func ProcSysCPU(pid int) (float64, error) {
	return procStatCPU(pid, statStime, statCstime)
}

// The CPU times of /proc/<pid>/stat (fields 14-17), as indexes into the
// fields after the command name (f[0] is field 3, state).
const (
	statUtime  = 11
	statStime  = 12
	statCutime = 13
	statCstime = 14
)

// procStatCPU returns the sum of the given CPU-time fields of
// /proc/<pid>/stat, in seconds.
func procStatCPU(pid int, fields ...int) (float64, error) {
	t, err := procStatTimes(pid, fields...)
	var sum float64
	for _, v := range t {
		sum += v
	}
	return sum, err
}

// procStatTimes returns the given CPU-time fields of /proc/<pid>/stat,
// each in seconds, from one read of it.
func procStatTimes(pid int, fields ...int) ([]float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	// The command name (field 2) may hold spaces; the fields after its
	// closing parenthesis are space-separated.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) <= statCstime {
		return nil, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	out := make([]float64, len(fields))
	for j, k := range fields {
		v, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		out[j] = float64(v) / clockTicks
	}
	return out, nil
}

// HostTCPMemory returns what every TCP socket on the host holds in the
// kernel (send and receive queues), in bytes: the "mem" pages of
// /proc/net/sockstat's TCP line. On one machine it counts the load
// generator's sockets as well as the server's.
func HostTCPMemory() (int64, error) {
	b, err := os.ReadFile("/proc/net/sockstat")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, "TCP:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		for i := 0; i+1 < len(f); i += 2 {
			if f[i] == "mem" {
				pages, err := strconv.ParseInt(f[i+1], 10, 64)
				if err != nil {
					return 0, fmt.Errorf("/proc/net/sockstat: %w", err)
				}
				return pages * int64(os.Getpagesize()), nil
			}
		}
	}
	return 0, errors.New("/proc/net/sockstat: no TCP mem")
}

// TCPMemPressure returns the host's TCP memory pressure threshold in
// bytes, the middle value of net.ipv4.tcp_mem: above it the kernel
// shrinks socket buffers and may drop segments, for every socket.
func TCPMemPressure() (int64, error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_mem")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) != 3 {
		return 0, fmt.Errorf("tcp_mem: %q", b)
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("tcp_mem: %w", err)
	}
	return pages * int64(os.Getpagesize()), nil
}

// ProcTreeCPU returns the CPU seconds of process pid and of its live
// descendants, each with its reaped children: all of PostgreSQL, whose
// long-lived backends (a consensus store's pooled connections) reach the
// postmaster's count only when they exit. A descendant that exits between
// the reads may be missed or counted twice; that is a few ticks at most.
func ProcTreeCPU(pid int) (float64, error) {
	total, err := ProcCPU(pid)
	if err != nil {
		return 0, err
	}
	for _, c := range procChildren(pid) {
		if v, err := ProcTreeCPU(c); err == nil {
			total += v
		}
	}
	return total, nil
}

// procChildren returns the live children of pid, from each of its
// threads' /proc/<pid>/task/<tid>/children.
func procChildren(pid int) []int {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, s := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(s); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// ProcRSS returns the resident set size of process pid in bytes (VmRSS).
func ProcRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status VmRSS: %w", pid, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// MetricsCPU scrapes process_cpu_seconds_total from a Prometheus endpoint.
func MetricsCPU(ctx context.Context, url string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, fmt.Errorf("scrape %s: %w", url, err)
	}
	for line := range strings.Lines(string(body)) {
		if rest, ok := strings.CutPrefix(line, "process_cpu_seconds_total "); ok {
			return strconv.ParseFloat(strings.TrimSpace(rest), 64)
		}
	}
	return 0, errors.New("scrape " + url + ": no process_cpu_seconds_total")
}

// ScrapeCounters returns the values of the named metrics (summed over
// their label sets) from a Prometheus endpoint; missing names are absent.
func ScrapeCounters(ctx context.Context, url string, names []string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	out := map[string]float64{}
	for line := range strings.Lines(string(body)) {
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = name[:i]
		}
		for _, want := range names {
			if name == want {
				if v, err := strconv.ParseFloat(rest, 64); err == nil {
					out[name] += v
				}
			}
		}
	}
	return out, nil
}

// SelfCPU returns the CPU seconds (user + system) this process has used.
func SelfCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return tv(ru.Utime) + tv(ru.Stime)
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

// CPUProbe reads a server's cumulative CPU seconds: from /proc when the
// server's pid is known, else from its /metrics. The zero probe reads
// nothing.
type CPUProbe struct {
	PID int
	// Tree counts PID's live descendants too (ProcTreeCPU).
	Tree       bool
	MetricsURL string
}

// Enabled reports whether the probe has a source.
func (p CPUProbe) Enabled() bool { return p.PID > 0 || p.MetricsURL != "" }

// Read returns the server's cumulative CPU seconds.
func (p CPUProbe) Read(ctx context.Context) (float64, error) {
	switch {
	case p.PID > 0 && p.Tree:
		return ProcTreeCPU(p.PID)
	case p.PID > 0:
		return ProcCPU(p.PID)
	case p.MetricsURL != "":
		return MetricsCPU(ctx, p.MetricsURL)
	}
	return 0, errors.New("no server pid or metrics URL")
}

// cpuSince reads the probes now, and returns a function that reads them
// again and returns each one's CPU seconds in between: -1 for a probe that
// has no source or failed.
func cpuSince(ctx context.Context, probes ...CPUProbe) func() []float64 {
	before := readCPU(ctx, probes)
	return func() []float64 {
		after := readCPU(ctx, probes)
		for i := range after {
			if before[i] < 0 || after[i] < 0 {
				after[i] = -1
			} else {
				after[i] -= before[i]
			}
		}
		return after
	}
}

// readCPU reads each probe (-1: no source, or failed).
func readCPU(ctx context.Context, probes []CPUProbe) []float64 {
	out := make([]float64, len(probes))
	for i, p := range probes {
		out[i] = -1
		if p.Enabled() {
			if v, err := p.Read(ctx); err == nil {
				out[i] = v
			}
		}
	}
	return out
}

// ProcWriteSyscalls returns the write system calls process pid has made
// (syscw of /proc/<pid>/io: write, writev and the like, which is how Go
// writes to a socket), for the syscalls per delivered row of (c).
func ProcWriteSyscalls(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "syscw:"); ok {
			return strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/io: no syscw", pid)
}
