package bench

import (
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkLoopbackFloor is the floor under (c)'s live fan-out on this
// machine: a writer that does nothing but write(2) one message to each of
// n loopback sockets in turn (on two goroutines, raw non-blocking
// descriptors: no framing, no queue, no scheduling of sessions), and a
// reader per socket that does nothing but read(2) into a 64 KiB buffer.
// A sweep is one write to every socket. At 100 rows/s a subscriber's
// rows wait, at the least, for the sweep to come round to its socket, so
// a p99 under 100 ms from INSERT to client needs a sweep well under that;
// ms/sweep-10k scales the measured sweep to 10,000 sockets (the process
// holds both ends: 2n descriptors). cpu-µs/write is the process's CPU
// (writer and readers, kernel included) per write.
//
//	go test ./bench -run XXX -bench LoopbackFloor -benchtime 5s
func BenchmarkLoopbackFloor(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		for _, size := range []int{1500} {
			b.Run(fmt.Sprintf("sockets=%d/bytes=%d", n, size), func(b *testing.B) {
				loopbackFloor(b, n, size)
			})
		}
	}
}

func loopbackFloor(b *testing.B, n, size int) {
	if _, err := RaiseFileLimit(uint64(2*n + 256)); err != nil {
		b.Skip("file limit:", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	var readers sync.WaitGroup
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
		readers.Wait()
	}()
	fds := make([]int, 0, n)
	for range n {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
		readers.Add(1)
		go func() {
			defer readers.Done()
			io.CopyBuffer(io.Discard, struct{ io.Reader }{c}, make([]byte, 64<<10))
		}()
		s, err := ln.Accept()
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, s)
		rc, err := s.(*net.TCPConn).SyscallConn()
		if err != nil {
			b.Fatal(err)
		}
		rc.Control(func(fd uintptr) { fds = append(fds, int(fd)) })
	}
	msg := make([]byte, size)
	const writers = 2
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	start := time.Now()
	b.ResetTimer()
	// b.N sweeps, split between the writers.
	var wg sync.WaitGroup
	var writes [writers]int
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range b.N {
				for i := w; i < len(fds); i += writers {
					if _, err := syscall.Write(fds[i], msg); err == nil {
						writes[w]++
					}
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	elapsed := time.Since(start)
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano() - ru0.Utime.Nano() + ru1.Stime.Nano() - ru0.Stime.Nano())
	total := writes[0] + writes[1]
	sweep := elapsed / time.Duration(b.N)
	b.ReportMetric(float64(sweep.Microseconds())/1000, "ms/sweep")
	b.ReportMetric(float64(sweep.Microseconds())/1000*10000/float64(n), "ms/sweep-10k")
	b.ReportMetric(float64(cpu.Microseconds())/float64(max(total, 1)), "cpu-µs/write")
	b.ReportMetric(float64(n*b.N-total), "eagain")
}
