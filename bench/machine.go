package bench

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Machine describes where a run happened.
type Machine struct {
	CPUs      int     `json:"cpus"`
	CPUModel  string  `json:"cpu_model"`
	MemoryGiB float64 `json:"memory_gib"`
	Kernel    string  `json:"kernel"`
	OS        string  `json:"os"`
	// LoadStart and LoadEnd are /proc/loadavg's 1, 5 and 15 minute load
	// averages when the run started and ended: others' work on a shared
	// machine shows there.
	LoadStart string `json:"load_start"`
	LoadEnd   string `json:"load_end"`
	// FileLimit is the RLIMIT_NOFILE the bench raised itself to, which
	// the servers it starts inherit (0: not recorded).
	FileLimit uint64 `json:"rlimit_nofile,omitempty"`
	// TCPMemPressure is net.ipv4.tcp_mem's pressure threshold in bytes
	// (0: not recorded), against which (a)'s HostTCPPeak is read.
	TCPMemPressure int64 `json:"tcp_mem_pressure_bytes,omitempty"`
}

// LoadAverage returns the 1, 5 and 15 minute load averages.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// Versions are the versions of what ran.
type Versions struct {
	Go        string `json:"go"`
	Shardtail string `json:"shardtail"`
	Commit    string `json:"commit,omitempty"`
	Postgres  string `json:"postgres,omitempty"`
}

// DescribeMachine reads the machine's description from /proc.
func DescribeMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), OS: runtime.GOOS + "/" + runtime.GOARCH, LoadStart: LoadAverage()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
				m.MemoryGiB = kb / (1 << 20)
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.TCPMemPressure, _ = TCPMemPressure()
	return m
}

// DescribeVersions returns the toolchain the binary was built with, the
// shardtail version, and the git commit of the working directory when it
// is a checkout ("+dirty" when it has changes).
func DescribeVersions(ctx context.Context, shardtail string) Versions {
	v := Versions{Go: runtime.Version(), Shardtail: shardtail}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		v.Commit = strings.TrimSpace(string(out))
		if out, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(out) > 0 {
			v.Commit += "+dirty"
		}
	}
	return v
}
