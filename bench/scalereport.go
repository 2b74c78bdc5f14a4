package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// The report's view of scale: (a)'s server CPU per client against N (does
// a subscribe cost more when more are running?), what a connection costs
// the process, and (c) at each of its sizes.

// flatWithin is how much (a)'s server CPU per client may vary over N, as
// max ÷ min of the medians, for it to count as flat: no O(N) term per
// subscribe.
const flatWithin = 1.2

// perClientOverN returns, for pr, f over each N's runs and max ÷ min of
// their medians over the Ns that ran (-1 with fewer than two).
func perClientOverN(pr *PathResults, ns []int, f func(*StormResult) float64) (each []spread, ratio float64) {
	ratio = -1
	var got []float64
	for _, n := range ns {
		sp := stormSpread(pr, n, f)
		each = append(each, sp)
		if sp.med > 0 {
			got = append(got, sp.med)
		}
	}
	if len(got) >= 2 {
		ratio = slices.Max(got) / slices.Min(got)
	}
	return each, ratio
}

// clientCPUPerClientMS is the load generator's CPU per connected client in
// ms.
func clientCPUPerClientMS(r *StormResult) float64 {
	if r.Connected == 0 {
		return -1
	}
	return r.ClientCPU * 1000 / float64(r.Connected)
}

// serverSysCPUPerClientMS is what of the server's CPU per connected client
// was spent in the kernel, in ms (-1: not measured).
func serverSysCPUPerClientMS(r *StormResult) float64 {
	if r.Connected == 0 || r.ServerSysCPU <= 0 {
		return -1
	}
	return r.ServerSysCPU * 1000 / float64(r.Connected)
}

// writeStormScaling writes (a)'s CPU per client against N for each path,
// server and client, with max ÷ min over N.
func writeStormScaling(w io.Writer, res *Results, cfg SuiteConfig) {
	ns := cfg.Clients
	if len(ns) < 2 {
		return
	}
	fmt.Fprintf(w, "CPU per client against N (median of the runs, min–max); *max ÷ min* of the medians over the Ns a path ran is %.2f or less when the cost of a "+
		"subscribe does not grow with the number of subscribers (flat within %.0f%%).",
		flatWithin, 100*(flatWithin-1))
	if cfg.DataflowMaxClients > 0 && slices.Max(ns) > cfg.DataflowMaxClients {
		fmt.Fprintf(w, " The dataflow path ran up to N=%s only (`--dataflow-max-clients`): at some 20 ms of CPU per subscribe its larger storms "+
			"would take minutes each.", commas(cfg.DataflowMaxClients))
	}
	if res.Paths[PathPostgres] != nil && cfg.PostgresMaxClients > 0 && slices.Max(ns) > cfg.PostgresMaxClients {
		fmt.Fprintf(w, " PostgreSQL ran up to N=%s (`--postgres-max-clients`): a backend process per connection.", commas(cfg.PostgresMaxClients))
	}
	fmt.Fprintf(w, "\n\n| path | CPU per client |")
	for _, n := range ns {
		fmt.Fprintf(w, " N=%s |", commas(n))
	}
	fmt.Fprintf(w, " max ÷ min | flat within %.0f%% |\n|---|---|%s---:|---|\n", 100*(flatWithin-1), strings.Repeat("---:|", len(ns)))
	for _, name := range reportPaths {
		pr := res.Paths[name]
		if pr == nil || len(pr.Storms) == 0 {
			continue
		}
		for _, side := range []struct {
			name string
			f    func(*StormResult) float64
		}{
			{"server", func(s *StormResult) float64 { return s.ServerCPUPerClientMS() }},
			{"server, of it in the kernel", serverSysCPUPerClientMS},
			{"client (load generator)", clientCPUPerClientMS},
		} {
			each, ratio := perClientOverN(pr, ns, side.f)
			if !slices.ContainsFunc(each, func(sp spread) bool { return sp.n > 0 }) {
				continue // not measured (a report from before, or a tail's /metrics)
			}
			fmt.Fprintf(w, "| %s | %s |", name, side.name)
			for _, sp := range each {
				fmt.Fprintf(w, " %s |", sp.text(ms))
			}
			flat := "—"
			if ratio > 0 {
				flat = "no"
				if ratio <= flatWithin {
					flat = "yes"
				}
			}
			fmt.Fprintf(w, " %s | %s |\n", fmtOr(func(x float64) string { return fmt.Sprintf("%.2f", x) }, ratio), flat)
		}
	}
	fmt.Fprintln(w)
}

// writeHostTCP writes the most the host's TCP sockets held during (a)'s
// storms at each N, against the kernel's pressure threshold: on one
// machine the clients' receive queues count too, and past the threshold
// every socket's sends are throttled.
func writeHostTCP(w io.Writer, res *Results, ns []int, pressure int64) {
	var lines []string
	for _, name := range reportPaths {
		pr := res.Paths[name]
		if pr == nil || len(pr.Storms) == 0 {
			continue
		}
		var each []string
		for _, n := range ns {
			sp := stormSpread(pr, n, func(s *StormResult) float64 {
				if s.HostTCPPeak <= 0 {
					return -1
				}
				return float64(s.HostTCPPeak)
			})
			if sp.n > 0 {
				each = append(each, fmt.Sprintf("N=%s %s", commas(n), sp.text(mib)))
			}
		}
		if len(each) > 0 {
			lines = append(lines, fmt.Sprintf("- %s: %s", name, strings.Join(each, "; ")))
		}
	}
	if len(lines) == 0 {
		return
	}
	threshold := ""
	if pressure > 0 {
		threshold = fmt.Sprintf(" The kernel's pressure threshold (net.ipv4.tcp_mem) is %s: above it every socket's buffers shrink and segments may be dropped, "+
			"which costs the server retransmissions and more, smaller writes.", mib(float64(pressure)))
	}
	fmt.Fprintf(w, "Peak TCP memory of the host during the storms (/proc/net/sockstat, every socket: the server's send queues and the clients' receive queues, "+
		"which share the machine).%s\n\n%s\n\n", threshold, strings.Join(lines, "\n"))
}

// writeConnCost writes what one connection holding its subscribe cost the
// server at each N of (a), from its /metrics.
func writeConnCost(w io.Writer, res *Results, ns []int) {
	var rows []string
	for _, name := range []string{PathFast, PathDataflow} {
		pr := res.Paths[name]
		if pr == nil {
			continue
		}
		for _, n := range ns {
			per := func(k string, format func(float64) string) string {
				return stormSpread(pr, n, func(s *StormResult) float64 {
					v, ok := s.PerConnection[k]
					if !ok {
						return -1
					}
					return max(0, v)
				}).text(format)
			}
			if stormSpread(pr, n, func(s *StormResult) float64 { return float64(len(s.PerConnection)) - 1 }).n == 0 {
				continue // not scraped (a report from before)
			}
			rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s |", name, commas(n),
				per("process_open_fds", decimal), per("go_goroutines", decimal), per("process_resident_memory_bytes", kibOfBytes),
				per("go_memstats_heap_inuse_bytes", kibOfBytes), per("go_memstats_stack_inuse_bytes", kibOfBytes),
				per(IdleCPUPerSecond, func(v float64) string { return us(v * 1e6) }), per(IdleWritesPerSecond, decimal)))
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "What one connection holding its subscribe costs the server: the increase of its gauges (/metrics) from before the storm to "+
		"when every snapshot was complete, each read after a garbage collection, ÷ the clients; then, over %v with every client idle, the server's "+
		"CPU and write syscalls per idle subscriber per second (each tick's progress row, one write each). That pause's CPU is left out of the "+
		"storm's. A storm of N that lasts T seconds also pays about N × T ÷ 2 of those idle seconds for the subscribers already in: a term that "+
		"grows with N when T does. The server raises RLIMIT_NOFILE to its hard limit at start, and so does the load generator (this process).\n\n"+
		"| path | N | descriptors | goroutines | RSS | Go heap in use | goroutine stacks | idle CPU per second | idle writes per second |\n"+
		"|---|---:|---:|---:|---:|---:|---:|---:|---:|\n%s\n\n",
		idleWindow, strings.Join(rows, "\n"))
}

func decimal(v float64) string    { return fmt.Sprintf("%.2f", v) }
func kibOfBytes(v float64) string { return kib(v / 1024) }

// writeLiveSection writes (c), the live fan-out, a table for each of its
// sizes.
func writeLiveSection(w io.Writer, v *reportView) {
	cfg, fast, flow := v.r.Config, v.fast, v.flow
	if !(fast != nil && fast.Live != nil || flow != nil && flow.Live != nil) {
		return
	}
	fmt.Fprintf(w, "## (c) Live fan-out\n\nSubscribers (`COPY (SUBSCRIBE live WITH (PROGRESS)) TO STDOUT` on a table) while one writer inserts "+
		"rows at a steady rate (an INSERT every %v of the rows due) for %v. Each row's payload starts with the wall clock of its INSERT; *write to "+
		"client* is from just before the INSERT is sent to the row's arrival at a subscriber, so it includes the commit. Every subscriber must "+
		"receive every row written: the rows one did not (waited for within the client timeout) are *missing*, and the subscriber an error. "+
		"CPU and the server's write system calls (syscw of /proc/<pid>/io) are counted while the writer runs and for %v after; client CPU is the "+
		"load generator's (subscribers and writer).\n\n",
		writerTick, cfg.fanoutDuration(), liveDrain)
	writeFloor(w, v.r.Results.Floor)
	sizes := cfg.liveSizes()
	for _, ls := range sizes {
		f, d := fast.liveRunsAt(ls), flow.liveRunsAt(ls)
		if len(f) == 0 && len(d) == 0 {
			continue
		}
		fmt.Fprintf(w, "### %s subscribers, %s rows/s\n\n", commas(ls.Clients), commas(ls.Rate))
		if len(d) == 0 && flow != nil && !cfg.onPath(PathDataflow, ls.Clients) {
			fmt.Fprintf(w, "The dataflow path did not run this size (`--dataflow-max-clients %d`).\n\n", cfg.DataflowMaxClients)
		}
		writeLiveTable(w, f, d)
	}
}

// writeFloor describes this machine's floor under (c), if measured.
func writeFloor(w io.Writer, f *Floor) {
	switch {
	case f == nil:
		return
	case len(f.SweepSeconds) == 0:
		fmt.Fprintf(w, "**This machine's floor** was not measured: %s.\n\n", f.Error)
		return
	}
	fmt.Fprintf(w, "**This machine's floor** (measured by the bench before the servers start, `bench.LoopbackSweep`): a process that does nothing "+
		"but write(2) %s bytes to each of %s loopback sockets in turn (two threads, raw descriptors: no framing, no queue, no sessions) while "+
		"a goroutine per socket does nothing but read(2) them sweeps the %s sockets in %s, with %s of CPU per write and its read (kernel "+
		"included); at 10,000 sockets that is %s per sweep. At a steady rate a subscriber's next row waits at the least for the sweep to "+
		"come round to its socket: a server's sweep adds its own work per write, the load generator its own per read (each row parsed), "+
		"and the row its INSERT's commit.\n\n",
		commas(f.Bytes), commas(f.Sockets), commas(f.Sockets), f.sweepMS(f.Sockets).text(msRaw), f.cpuUS().text(us), f.sweepMS(10000).text(msRaw))
}

// sweepMS is the time per sweep in milliseconds over the runs, scaled to
// n sockets.
func (f *Floor) sweepMS(n int) spread {
	return scaledSpread(f.SweepSeconds, 1000*float64(n)/float64(f.Sockets))
}

// cpuUS is the CPU per write and read in microseconds over the runs.
func (f *Floor) cpuUS() spread { return scaledSpread(f.CPUPerWrite, 1e6) }

// scaledSpread is the spread of xs, each times scale.
func scaledSpread(xs []float64, scale float64) spread {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x * scale
	}
	return spreadValues(out)
}

// liveWriteSeconds is how long a live run's writer wrote: WriteSeconds, or
// the live phase of a report from before it.
func liveWriteSeconds(l *LiveResult) float64 {
	if l.WriteSeconds > 0 {
		return l.WriteSeconds
	}
	return l.Storm.LiveSeconds
}

// perDelivery is x per live row delivered (-1 when either is unknown),
// times scale.
func perDelivery(l *LiveResult, x, scale float64) float64 {
	if x < 0 || l.Storm.LiveRows == 0 {
		return -1
	}
	return x * scale / float64(l.Storm.LiveRows)
}

// measuredWhileWriting is f of a live run that measured the writer's
// window (reports from before have zeros there), else -1.
func measuredWhileWriting(f func(*LiveResult) float64) func(*LiveResult) float64 {
	return func(l *LiveResult) float64 {
		if l.WriteServerCPU == 0 && l.WriteClientCPU == 0 {
			return -1
		}
		return f(l)
	}
}

// liveRow is a row of (c)'s table: a figure of one live run.
type liveRow struct {
	name  string
	f     func(*LiveResult) float64
	fmt   func(float64) string
	ratio bool // the row has a dataflow ÷ fast column
}

// The rows of (c) that the README's summary shows too.
var (
	liveRowP50 = liveRow{"write to client p50", func(l *LiveResult) float64 { return l.Storm.Latency.P50 }, msRaw, true}
	liveRowP99 = liveRow{"write to client p99", liveP99, msRaw, true}

	liveRowDeliveriesPerSecond = liveRow{"deliveries per second (while writing)", func(l *LiveResult) float64 {
		return float64(l.Storm.LiveRows) / liveWriteSeconds(l)
	}, count, false}
	liveRowServerCPUPerDelivery = liveRow{"server CPU per delivery", measuredWhileWriting(func(l *LiveResult) float64 {
		return perDelivery(l, l.WriteServerCPU, 1e6)
	}), us, true}
	liveRowWritesPerDelivery = liveRow{"server write syscalls per delivered row", measuredWhileWriting(func(l *LiveResult) float64 {
		return perDelivery(l, float64(l.WriteSyscalls), 1)
	}), decimal3, true}
	// The two per write are what the floor's CPU per write and its read
	// splits into, with the server's and the load generator's own work.
	liveRowServerCPUPerWrite = liveRow{"server CPU per write syscall", measuredWhileWriting(func(l *LiveResult) float64 {
		return perWrite(l, l.WriteServerCPU)
	}), us, true}
	liveRowClientCPUPerWrite = liveRow{"client CPU per server write syscall", measuredWhileWriting(func(l *LiveResult) float64 {
		return perWrite(l, l.WriteClientCPU)
	}), us, false}
)

// perWrite is cpu seconds per write syscall of the server while the
// writer ran, in microseconds (-1 when either is unknown).
func perWrite(l *LiveResult, cpu float64) float64 {
	if cpu < 0 || l.WriteSyscalls <= 0 {
		return -1
	}
	return cpu * 1e6 / float64(l.WriteSyscalls)
}

// liveTableRows are the rows of (c)'s table, in order.
var liveTableRows = []liveRow{
	{"subscribers with a complete snapshot", func(l *LiveResult) float64 { return float64(l.Storm.Completed) }, count, false},
	{"rows written", func(l *LiveResult) float64 { return float64(l.Written) }, count, false},
	{"INSERT latency p50", func(l *LiveResult) float64 { return l.WriteLatency.P50 }, msRaw, true},
	{"INSERT latency p99", func(l *LiveResult) float64 { return l.WriteLatency.P99 }, msRaw, true},
	liveRowP50,
	liveRowP99,
	{"write to client max", func(l *LiveResult) float64 { return l.Storm.Latency.Max }, msRaw, true},
	{"rows delivered to subscribers", func(l *LiveResult) float64 { return float64(l.Storm.LiveRows) }, count, false},
	{"of the rows written × subscribers", func(l *LiveResult) float64 { return 100 * l.Delivered }, pct, false},
	{"rows missing (subscriber × row)", func(l *LiveResult) float64 {
		if l.Storm.LiveWanted == 0 {
			return -1 // not checked (a run from before the check)
		}
		return float64(l.Storm.LiveMissing)
	}, count, false},
	liveRowDeliveriesPerSecond,
	{"server CPU while writing", measuredWhileWriting(func(l *LiveResult) float64 { return l.WriteServerCPU }), cpuSecs, true},
	{"client CPU while writing", measuredWhileWriting(func(l *LiveResult) float64 { return l.WriteClientCPU }), cpuSecs, false},
	liveRowServerCPUPerDelivery,
	liveRowWritesPerDelivery,
	liveRowServerCPUPerWrite,
	liveRowClientCPUPerWrite,
	{"server CPU (whole run)", func(l *LiveResult) float64 { return l.Storm.ServerCPU }, cpuSecs, true},
	{"client CPU (whole run)", func(l *LiveResult) float64 { return l.Storm.ClientCPU }, cpuSecs, false},
	{"errors", func(l *LiveResult) float64 { return float64(l.Storm.Errors + l.WriteErrors) }, count, false},
}

// spread is the row's figure over runs (each with a storm).
func (row liveRow) spread(runs []*LiveResult) spread {
	return spreadOf(runs, func(l *LiveResult) float64 {
		if l.Storm == nil {
			return -1
		}
		return row.f(l)
	})
}

func us(v float64) string       { return fmt.Sprintf("%.2f µs", v) }
func decimal3(v float64) string { return fmt.Sprintf("%.3f", v) }

// scaleGoals are issue 19's targets of scale, on the fast path: (a)'s
// server CPU per client flat over N with no errors at the largest, and
// (c)'s every size: every row to every subscriber, p99 under 100 ms.
func scaleGoals(r *Report, add func(what, target string, measured float64, format func(float64) string, ok func(float64) bool)) {
	fast := r.Results.Paths[PathFast]
	ns := r.Config.Clients
	if len(ns) >= 2 {
		ratio := -1.0
		if fast != nil && len(fast.Storms) > 0 {
			_, ratio = perClientOverN(fast, ns, func(s *StormResult) float64 { return s.ServerCPUPerClientMS() })
		}
		add(fmt.Sprintf("fast-path server CPU per client, max ÷ min over N=%s…%s", commas(slices.Min(ns)), commas(slices.Max(ns))),
			fmt.Sprintf("≤ %.2f", flatWithin), ratio, func(x float64) string { return fmt.Sprintf("%.2f", x) },
			func(x float64) bool { return x <= flatWithin })
		n := slices.Max(ns)
		errs := -1.0
		if s := stormOf(fast, n); s != nil {
			errs = float64(s.Errors + s.Clients - s.Completed)
		}
		add(fmt.Sprintf("fast-path storm at N=%s: clients failed", commas(n)), "0", errs, count, func(x float64) bool { return x == 0 })
	}
	if !r.Config.runs(ScenarioLive) {
		return
	}
	for _, ls := range r.Config.liveSizes() {
		runs := fast.liveRunsAt(ls)
		at := fmt.Sprintf("(c) %s subscribers at %s rows/s", commas(ls.Clients), commas(ls.Rate))
		missing := spreadOf(runs, func(l *LiveResult) float64 {
			if l.Storm.LiveWanted == 0 {
				return -1
			}
			return float64(l.Storm.LiveMissing + int64(l.Storm.Errors))
		})
		add(at+": rows missing and failed subscribers (worst run)", "0", missing.hi, count, func(x float64) bool { return x == 0 })
		p99 := spreadOf(runs, func(l *LiveResult) float64 {
			if l.Storm.Latency.N == 0 {
				return -1
			}
			return l.Storm.Latency.P99
		})
		add(at+": write to client p99", "< 100 ms", p99.med, msRaw, func(x float64) bool { return x < 100 })
	}
}
