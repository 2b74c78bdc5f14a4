package bench

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tailResults is a made-up (f) for the report tests.
func tailResults() *TailResults {
	storm := func(n int) *StormResult {
		return &StormResult{Clients: n, Connected: n, Completed: n, StormSeconds: 1.5, ServerCPU: 2,
			Snapshot: Dist{N: n, P50: 0.5, P95: 1.25}}
	}
	counters := func(subs float64) map[string]float64 {
		return map[string]float64{"shardtail_subscribes_total": subs, "shardtail_tail_snapshot_cursors_total": 1}
	}
	return &TailResults{
		StorageKind: StorageFile, Storage: "a directory", Rows: 10, PayloadBytes: 64,
		Load: map[string]float64{"copy src": 0.5},
		Storms: []*TailStorm{
			{Via: TargetAll, Path: PathFast, Storm: storm(2048), TailCPU: 0, UpstreamCPU: 2, ConsensusCPU: -1,
				TailCounters: counters(0), UpstreamCounters: counters(2048)},
			{Via: TargetTail, Path: PathFast, Storm: storm(2048), TailCPU: 1, UpstreamCPU: 0.02, ConsensusCPU: -1,
				TailCounters: counters(2048), UpstreamCounters: counters(0)},
		},
	}
}

func TestWriteProxySection(t *testing.T) {
	var b strings.Builder
	writeProxySection(&b, tailResults(), ModeCopy)
	got := b.String()
	for _, want := range []string{
		"## (f) Storm through a tail process",
		"| 2,048 | fast | role all | 1.50 s | 500.0 ms | 1.25 s | 0.00 ms | 0.98 ms | 0.00 s / 2.00 s / — |",
		"| 2,048 | fast | tail | 1.50 s | 500.0 ms | 1.25 s | 0.49 ms | 0.01 ms | 1.00 s / 0.02 s / — |",
		"| 2,048 | fast | tail | 2,048 | 1 | — | — | 0 | 1 | — | — |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("section lacks %q; got:\n%s", want, got)
		}
	}
	if strings.Contains(got, "merged into this report") {
		t.Errorf("a section of this run says it was merged:\n%s", got)
	}
}

func TestMergeTail(t *testing.T) {
	into := &Report{Command: "bench", Config: DefaultSuite(false), Results: &Results{Paths: map[string]*PathResults{
		PathFast: {Path: PathFast, Storms: []*StormResult{{Clients: 2048}}},
	}}}
	from := &Report{
		Started: time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC), Seconds: 90, Command: "bench --scenarios f --merge latest.json",
		Versions: Versions{Shardtail: "0.1.0", Commit: "abc"},
		Config:   SuiteConfig{TailClients: []int{2048}, TailDataflowClients: 256, TailStorage: StorageS3},
		Results:  &Results{Paths: map[string]*PathResults{}, Tail: tailResults()},
	}
	if err := MergeTail(into, &Report{Results: &Results{}}); err == nil {
		t.Fatal("merging a run without (f): no error")
	}
	if err := MergeTail(into, from); err != nil {
		t.Fatal(err)
	}
	if into.Command != "bench" || len(into.Results.Paths[PathFast].Storms) != 1 {
		t.Errorf("merge changed the earlier run: command %q, paths %v", into.Command, into.Results.Paths)
	}
	if got := into.Results.Tail; got == nil || got.Run == nil || got.Run.Command != from.Command || got.Run.Commit != "abc" {
		t.Fatalf("merged (f): got %+v", got)
	}
	if from.Results.Tail.Run != nil {
		t.Error("merge changed the run it merged from")
	}
	if !slices.Equal(into.Config.TailClients, []int{2048}) || into.Config.TailStorage != StorageS3 {
		t.Errorf("merged config: got %v %q", into.Config.TailClients, into.Config.TailStorage)
	}
	var b strings.Builder
	writeMarkdown(&b, into, false)
	for _, want := range []string{"Measured in a run of its own, 2026-11-29 18:00 UTC, 1m30s in all", from.Command, "| (f) through the tail | copy src | 0.50 |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// TestProcCPUPrecise: ProcCPU sees a few milliseconds of CPU, which
// /proc/<pid>/stat's 10 ms ticks would show as 0 or 10 ms.
func TestProcCPUPrecise(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	threadCPU := func() time.Duration {
		var ru syscall.Rusage
		must(t, syscall.Getrusage(syscall.RUSAGE_THREAD, &ru))
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	for range 5 {
		before, err := ProcCPU(os.Getpid())
		must(t, err)
		start := threadCPU()
		for threadCPU()-start < 3*time.Millisecond {
		}
		after, err := ProcCPU(os.Getpid())
		must(t, err)
		// The rest of the process (the collector, other tests' goroutines)
		// may add some; never less than this thread's 3 ms.
		if d := after - before; d < 0.003 || d > 0.1 {
			t.Errorf("ProcCPU went up %.4f s over 3 ms of this thread's CPU", d)
		}
	}
}

func TestProcTreeCPU(t *testing.T) {
	child := exec.Command("sleep", "30")
	must(t, child.Start())
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	if !slices.Contains(procChildren(os.Getpid()), child.Process.Pid) {
		t.Errorf("procChildren(%d) = %v; want it to hold %d", os.Getpid(), procChildren(os.Getpid()), child.Process.Pid)
	}
	self, err := ProcCPU(os.Getpid())
	must(t, err)
	tree, err := ProcTreeCPU(os.Getpid())
	must(t, err)
	if tree < self {
		t.Errorf("ProcTreeCPU %v below ProcCPU %v", tree, self)
	}
	// System time is a part of the whole; a process that makes system
	// calls for a while (ticks are 10 ms) has some.
	var sys float64
	for i := 0; sys == 0 && i < 1000; i++ {
		for range 100000 {
			syscall.Getppid()
		}
		sys, err = ProcSysCPU(os.Getpid())
		must(t, err)
	}
	if all, _ := ProcCPU(os.Getpid()); sys <= 0 || sys > all {
		t.Errorf("ProcSysCPU %v, ProcCPU %v: want 0 < system ≤ all", sys, all)
	}
}
