package bench

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkLoopbackFloor measures the Floor of (c) (see it) at a few
// sizes: ms/sweep-10k scales the sweep to 10,000 sockets (the process
// holds both ends of each: 2n descriptors); cpu-µs/write is the process's
// CPU per write and its read, kernel included.
//
//	go test ./bench -run XXX -bench LoopbackFloor
func BenchmarkLoopbackFloor(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("sockets=%d", n), func(b *testing.B) {
			if _, err := RaiseFileLimit(uint64(2*n + 256)); err != nil {
				b.Skip("file limit:", err)
			}
			for b.Loop() {
				sweep, cpu, err := LoopbackSweep(b.Context(), n, floorBytes, time.Second)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(sweep.Microseconds())/1000, "ms/sweep")
				b.ReportMetric(float64(sweep.Microseconds())/1000*10000/float64(n), "ms/sweep-10k")
				b.ReportMetric(float64(cpu.Nanoseconds())/1000, "cpu-µs/write")
			}
		})
	}
}

func TestLoopbackSweep(t *testing.T) {
	sweep, cpu, err := LoopbackSweep(t.Context(), 50, floorBytes, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if sweep <= 0 || cpu <= 0 {
		t.Errorf("sweep %v, CPU per write %v: want both above 0", sweep, cpu)
	}
}

// TestWriteFloorUnmeasured: a floor that failed says why rather than
// vanish from the report.
func TestWriteFloorUnmeasured(t *testing.T) {
	var b bytes.Buffer
	writeFloor(&b, &Floor{Sockets: 10, Bytes: floorBytes, Error: "connection 3 of 10: too many open files"})
	if got := b.String(); !strings.Contains(got, "not measured: connection 3 of 10: too many open files") {
		t.Errorf("writeFloor = %q; want the error", got)
	}
}
