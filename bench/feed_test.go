package bench

import (
	"bufio"
	"math"
	"strings"
	"testing"
)

// TestReadSSE: the bench's SSE reader stops at the named event, counts
// the rows of rows events only, and fails on reset, error and a stream
// that ends before the event.
func TestReadSSE(t *testing.T) {
	const stream = "retry: 1000\n\n" +
		"event: rows\ndata: [{\"mz_timestamp\":\"5\",\"mz_diff\":1,\"a\":1},{\"mz_timestamp\":\"5\",\"mz_diff\":-1,\"a\":2}]\n\n" +
		"event: progress\nid: 6\ndata: {\"frontier\":\"6\"}\n\n" +
		"event: rows\ndata: [{\"mz_timestamp\":\"6\",\"mz_diff\":1,\"a\":\"event: end\"}]\n\n"
	for _, tc := range []struct {
		name, in string
		stop     []byte
		rows     int
		err      string
	}{
		{"end", stream + "event: end\ndata: {\"frontier\":\"7\"}\n\n", sseEnd, 3, ""},
		{"progress", stream, sseProgress, 2, ""},
		{"reset", stream + "event: reset\ndata: {\"code\":\"53200\"}\n\n", sseEnd, 3, "event: reset data: {"},
		{"error", "event: error\ndata: {\"code\":\"XX000\"}\n\n", sseEnd, 0, "event: error"},
		{"cut short", stream, sseEnd, 3, "before event: end: EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, size := range []int{4096, 16} {
				// 16 bytes split lines: a piece that is not a line's
				// start must not start an event. Counting rows needs
				// whole lines.
				rows, err := readSSE(bufio.NewReaderSize(strings.NewReader(tc.in), size), tc.stop, size > 16)
				switch {
				case tc.err == "" && err != nil:
					t.Fatalf("buffer %d: got error %v, want none", size, err)
				case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
					t.Fatalf("buffer %d: got error %v, want one containing %q", size, err, tc.err)
				}
				if size > 16 && rows != tc.rows {
					t.Errorf("got %d rows, want %d", rows, tc.rows)
				}
			}
		})
	}
}

// TestFeedStormCPUPerClient: (i)'s CPU per client takes the server's
// baseline out of the storm's CPU, never going below zero, and is -1 when
// not measured.
func TestFeedStormCPUPerClient(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    *FeedStorm
		want float64
	}{
		{"no baseline", &FeedStorm{Clients: 100, ServerCPU: 0.2}, 2},
		{"baseline taken out", &FeedStorm{Clients: 100, ServerCPU: 0.2, BaselineCPU: 0.05}, 1.5},
		{"baseline over the storm", &FeedStorm{Clients: 100, ServerCPU: 0.2, BaselineCPU: 0.3}, 0},
		{"not measured", &FeedStorm{Clients: 100, ServerCPU: -1}, -1},
		{"nil", nil, -1},
	} {
		if got := tc.s.CPUPerClientMS(); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: CPUPerClientMS() = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestFeedCPURatios: (i)'s SSE ÷ pgwire ratios pair run i of the SSE
// storm with run i of the pgwire storm, leave out a pair either storm of
// which had errors or no CPU figure, and read a report from before runs
// (Storms only) as one run.
func TestFeedCPURatios(t *testing.T) {
	storm := func(cpu float64, errs int) *FeedStorm {
		return &FeedStorm{Clients: 100, Completed: 100 - errs, Errors: errs, ServerCPU: cpu}
	}
	for _, tc := range []struct {
		name string
		f    *FeedResult
		want []float64
	}{
		{"paired", &FeedResult{StormRuns: map[string][]*FeedStorm{
			"snapshot/sse":    {storm(0.3, 0), storm(0.2, 0), storm(0.4, 0)},
			"snapshot/pgwire": {storm(0.2, 0), storm(0.1, 0), storm(0.4, 0)},
		}}, []float64{1.5, 2, 1}},
		{"errors and unmeasured left out", &FeedResult{StormRuns: map[string][]*FeedStorm{
			"snapshot/sse":    {storm(0.3, 1), storm(0.2, 0), storm(-1, 0), storm(0.1, 0)},
			"snapshot/pgwire": {storm(0.2, 0), storm(0.1, 2), storm(0.4, 0), storm(0.1, 0)},
		}}, []float64{1}},
		{"before runs", &FeedResult{Storms: map[string]*FeedStorm{
			"snapshot/sse": storm(0.3, 0), "snapshot/pgwire": storm(0.2, 0),
		}}, []float64{1.5}},
		{"pgwire missing", &FeedResult{Storms: map[string]*FeedStorm{"snapshot/sse": storm(0.3, 0)}}, nil},
	} {
		got := tc.f.CPURatios("snapshot")
		if len(got) != len(tc.want) {
			t.Errorf("%s: CPURatios = %v, want %v", tc.name, got, tc.want)
			continue
		}
		for i := range got {
			if math.Abs(got[i]-tc.want[i]) > 1e-9 {
				t.Errorf("%s: CPURatios = %v, want %v", tc.name, got, tc.want)
				break
			}
		}
	}
}
