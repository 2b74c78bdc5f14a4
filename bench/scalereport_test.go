package bench

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseLiveSizes(t *testing.T) {
	got, err := ParseLiveSizes("10000x100, 1000x1000")
	must(t, err)
	if want := []LiveSize{{Clients: 10000, Rate: 100}, {Clients: 1000, Rate: 1000}}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for _, in := range []string{"", "1000", "x100", "0x100", "100x0", "100x-1", "10x10x10", "ax1"} {
		if got, err := ParseLiveSizes(in); err == nil {
			t.Errorf("ParseLiveSizes(%q) = %v, want an error", in, got)
		}
	}
}

// scaleReport is a report of (a) at N=256 and 1,024 (the dataflow path and
// PostgreSQL at 256 only) with serverMS and clientMS of CPU per client at
// each, and of (c) at two sizes.
func scaleReport(serverMS, clientMS [2]float64) *Report {
	cfg := DefaultSuite(true)
	cfg.Clients, cfg.DataflowMaxClients, cfg.PostgresMaxClients = []int{256, 1024}, 256, 256
	cfg.LiveSizes = []LiveSize{{Clients: 1000, Rate: 100}, {Clients: 100, Rate: 1000}}
	cfg.FanoutDuration = 30 * time.Second
	storm := func(n int, server, client float64) *StormResult {
		return &StormResult{Clients: n, Connected: n, Completed: n, ServerCPU: server * float64(n) / 1000, ClientCPU: client * float64(n) / 1000,
			PerConnection: map[string]float64{"process_open_fds": 1, "go_goroutines": 2, "process_resident_memory_bytes": 20 << 10,
				"go_memstats_heap_inuse_bytes": 8 << 10, "go_memstats_stack_inuse_bytes": 16 << 10,
				IdleCPUPerSecond: 20e-6, IdleWritesPerSecond: 1}}
	}
	fast := &PathResults{Path: PathFast, StormRuns: map[int][]*StormResult{256: {storm(256, serverMS[0], clientMS[0])}, 1024: {storm(1024, serverMS[1], clientMS[1])}}}
	fast.Storms = []*StormResult{fast.StormRuns[256][0], fast.StormRuns[1024][0]}
	flow := &PathResults{Path: PathDataflow, StormRuns: map[int][]*StormResult{256: {storm(256, 20, 1)}}}
	flow.Storms = []*StormResult{flow.StormRuns[256][0]}
	live := func(clients, rate int, missing int64, p99 float64) *LiveResult {
		written := int64(rate * 30)
		return &LiveResult{Rate: rate, Written: written, Delivered: 1, WriteSeconds: 30, WriteServerCPU: 3, WriteClientCPU: 6,
			WriteSyscalls: int64(clients) * written / 2,
			Storm: &StormResult{Clients: clients, Connected: clients, Completed: clients, LiveRows: int64(clients)*written - missing,
				LiveWanted: written, LiveMissing: missing, Latency: Dist{N: 1, P50: p99 / 2, P99: p99}}}
	}
	fast.LiveRuns = []*LiveResult{live(1000, 100, 0, 40), live(100, 1000, 7, 150)}
	fast.Live = fast.LiveRuns[0]
	flow.LiveRuns = []*LiveResult{live(100, 1000, 0, 300)}
	flow.Live = flow.LiveRuns[0]
	return &Report{Config: cfg, Results: &Results{Paths: map[string]*PathResults{PathFast: fast, PathDataflow: flow}}}
}

// TestReportStormScaling: (a) shows each path's server and client CPU per
// client at each N with max ÷ min, flat or not, and what a connection
// costs; the goal of flatness follows the ratio.
func TestReportStormScaling(t *testing.T) {
	for _, tc := range []struct {
		name              string
		server            [2]float64
		serverRow         string
		wantMet, wantMeas string
	}{
		{"Flat", [2]float64{0.5, 0.55}, "| fast | server | 0.50 ms | 0.55 ms | 1.10 | yes |", "yes", "1.10"},
		{"Grows", [2]float64{0.5, 0.75}, "| fast | server | 0.50 ms | 0.75 ms | 1.50 | no |", "no", "1.50"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := scaleReport(tc.server, [2]float64{1, 1.2})
			md := markdownOf(t, r)
			for _, want := range []string{
				tc.serverRow,
				"| fast | client (load generator) | 1.00 ms | 1.20 ms | 1.20 | yes |",
				"| dataflow | server | 20.00 ms | — | — | — |",
				"| fast | 1,024 | 1.00 | 2.00 | 20.0 KiB | 8.0 KiB | 16.0 KiB | 20.00 µs | 1.00 |\n",
				"The dataflow path ran up to N=256 only",
			} {
				if !strings.Contains(md, want) {
					t.Errorf("no %q in:\n%s", want, md)
				}
			}
			g := goalNamed(t, r, "fast-path server CPU per client, max ÷ min over N=256…1,024")
			if g.Met != tc.wantMet || g.Measured != tc.wantMeas {
				t.Errorf("goal: met %q, measured %q; want %q, %q", g.Met, g.Measured, tc.wantMet, tc.wantMeas)
			}
			// The storm's goals are at the largest N the dataflow path ran.
			goalNamed(t, r, "fast-path server CPU per client (N=256)")
		})
	}
}

// TestReportStormKernel: with the server's system time and the host's TCP
// memory measured, (a) shows the kernel's share of the server's CPU per
// client at each N and the TCP peaks against the pressure threshold; a
// report without them shows neither.
func TestReportStormKernel(t *testing.T) {
	r := scaleReport([2]float64{0.5, 0.6}, [2]float64{1, 1})
	if md := markdownOf(t, r); strings.Contains(md, "in the kernel") || strings.Contains(md, "Peak TCP memory") {
		t.Errorf("kernel rows without the measurements:\n%s", md)
	}
	fast := r.Results.Paths[PathFast]
	for i, n := range []int{256, 1024} {
		s := fast.StormRuns[n][0]
		s.ServerSysCPU = [2]float64{0.1, 0.2}[i] * float64(n) / 1000
		s.HostTCPPeak = [2]int64{100 << 20, 1500 << 20}[i]
	}
	r.Machine.TCPMemPressure = 1 << 30
	md := markdownOf(t, r)
	for _, want := range []string{
		"| fast | server, of it in the kernel | 0.10 ms | 0.20 ms | 2.00 | no |",
		"The kernel's pressure threshold (net.ipv4.tcp_mem) is 1024 MiB",
		"- fast: N=256 100 MiB; N=1,024 1500 MiB",
		"| TCP memory pressure threshold (net.ipv4.tcp_mem, all sockets of the host) | 1024 MiB |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("no %q in:\n%s", want, md)
		}
	}
	if strings.Contains(md, "| dataflow | server, of it in the kernel") {
		t.Errorf("a kernel row for the dataflow path, which did not measure it:\n%s", md)
	}
}

// TestHostTCP reads this host's TCP memory and pressure threshold (Linux).
func TestHostTCP(t *testing.T) {
	if _, err := HostTCPMemory(); err != nil {
		t.Error(err)
	}
	if p, err := TCPMemPressure(); err != nil || p <= 0 {
		t.Errorf("TCPMemPressure() = %d, %v", p, err)
	}
}

// TestReportLiveSizes: (c) has a table per size, with the rows missing,
// the CPU and syscalls per delivery; the goals hold every size to every
// row delivered and p99 under 100 ms.
func TestReportLiveSizes(t *testing.T) {
	r := scaleReport([2]float64{1, 1}, [2]float64{1, 1})
	md := markdownOf(t, r)
	big, small := strings.Index(md, "### 1,000 subscribers, 100 rows/s"), strings.Index(md, "### 100 subscribers, 1,000 rows/s")
	if big < 0 || small < big {
		t.Fatalf("no table per size, in order:\n%s", md)
	}
	first, second := md[big:small], md[small:]
	for _, want := range []string{
		"| rows missing (subscriber × row) | 0 | — |  |",
		"| deliveries per second (while writing) | 100,000 | — |  |",
		"| server CPU per delivery | 1.00 µs | — |  |",
		"| server write syscalls per delivered row | 0.500 | — |  |",
		"| client CPU while writing | 6.00 s | — |  |",
		"The dataflow path did not run this size",
	} {
		if !strings.Contains(first, want) {
			t.Errorf("no %q in the first size's table:\n%s", want, first)
		}
	}
	if want := "| rows missing (subscriber × row) | 7 | 0 |  |"; !strings.Contains(second, want) {
		t.Errorf("no %q in the second size's table:\n%s", want, second)
	}
	for what, want := range map[string]string{
		"(c) 1,000 subscribers at 100 rows/s: rows missing and failed subscribers (worst run)": "yes",
		"(c) 1,000 subscribers at 100 rows/s: write to client p99":                             "yes",
		"(c) 100 subscribers at 1,000 rows/s: rows missing and failed subscribers (worst run)": "no",
		"(c) 100 subscribers at 1,000 rows/s: write to client p99":                             "no",
	} {
		if g := goalNamed(t, r, what); g.Met != want {
			t.Errorf("goal %q: met %q (%s), want %q", what, g.Met, g.Measured, want)
		}
	}
}

// goalNamed returns r's goal of that name.
func goalNamed(t *testing.T, r *Report, what string) Goal {
	t.Helper()
	for _, g := range checkGoals(r) {
		if g.What == what {
			return g
		}
	}
	t.Fatalf("no goal %q in %+v", what, checkGoals(r))
	return Goal{}
}

// TestIdleProbeApply: (a)'s idle pause is taken out of the storm's CPU,
// server and client, and leaves the idle cost per subscriber per second.
func TestIdleProbeApply(t *testing.T) {
	r := &StormResult{Clients: 100, Completed: 100, ServerCPU: 1, ClientCPU: 2}
	p := idleProbe{server: 0.25, client: 0.5, idleCPU: 0.2, idleWrites: 400, seconds: 2}
	p.apply(r)
	if r.ServerCPU != 0.75 || r.ClientCPU != 1.5 {
		t.Errorf("CPU: server %v, client %v; want 0.75, 1.5", r.ServerCPU, r.ClientCPU)
	}
	if got, want := r.PerConnection[IdleCPUPerSecond], 0.001; got != want {
		t.Errorf("idle CPU per subscriber per second: got %v, want %v", got, want)
	}
	if got, want := r.PerConnection[IdleWritesPerSecond], 2.0; got != want {
		t.Errorf("idle writes per subscriber per second: got %v, want %v", got, want)
	}
}
