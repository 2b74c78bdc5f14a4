package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

// Floor is what (c)'s live fan-out cannot go below on this machine: a
// process that does nothing but write(2) one message to each of Sockets
// loopback sockets in turn (two threads, raw non-blocking descriptors: no
// framing, no queue, no sessions) while a goroutine per socket does
// nothing but read(2) it into a 64 KiB buffer. A sweep is one write to
// every socket. At a steady rate of rows a subscriber's next row waits,
// at the least, for the sweep to come round to its socket; a server's
// sweep adds its own work per write, and the load generator its own per
// read.
type Floor struct {
	Sockets int `json:"sockets"`
	Bytes   int `json:"bytes"`
	// SweepSeconds is each run's time per sweep; CPUPerWrite its CPU
	// seconds (the process's: writers and readers, kernel included) per
	// write and the read of it.
	SweepSeconds []float64 `json:"sweep_seconds"`
	CPUPerWrite  []float64 `json:"cpu_per_write_seconds"`
	Error        string    `json:"error,omitempty"`
}

// floorBytes is the message of a floor's writes: about what a subscriber
// of (c)'s 10,000 at 100 rows/s is written at once (some 15 rows).
const floorBytes = 1500

// floorRun is how long each run of the floor sweeps.
const floorRun = 2 * time.Second

// measureFloor measures runs of the floor over n socket pairs (2n
// descriptors in this process).
func measureFloor(ctx context.Context, n, runs int) *Floor {
	f := &Floor{Sockets: n, Bytes: floorBytes}
	for range runs {
		sweep, cpu, err := LoopbackSweep(ctx, n, floorBytes, floorRun)
		if err != nil {
			f.Error = err.Error()
			break
		}
		f.SweepSeconds = append(f.SweepSeconds, sweep.Seconds())
		f.CPUPerWrite = append(f.CPUPerWrite, cpu.Seconds())
	}
	return f
}

// LoopbackSweep opens n loopback connections, each read by a goroutine
// of its own, and sweeps them, writing size bytes to each in turn from two
// goroutines, for about d. It returns the time per sweep and the CPU of
// the whole process per write (and its read).
func LoopbackSweep(ctx context.Context, n, size int, d time.Duration) (sweep, cpuPerWrite time.Duration, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, 0, err
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
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return 0, 0, fmt.Errorf("connection %d of %d: %w", len(fds)+1, n, err)
		}
		conns = append(conns, c)
		readers.Add(1)
		go func() {
			defer readers.Done()
			// Hide WriterTo: Discard's ReaderFrom would pick its own
			// buffer size.
			io.CopyBuffer(io.Discard, struct{ io.Reader }{c}, make([]byte, 64<<10))
		}()
		s, err := ln.Accept()
		if err != nil {
			return 0, 0, err
		}
		conns = append(conns, s)
		rc, err := s.(*net.TCPConn).SyscallConn()
		if err != nil {
			return 0, 0, err
		}
		if err := rc.Control(func(fd uintptr) { fds = append(fds, int(fd)) }); err != nil {
			return 0, 0, err
		}
	}
	msg := make([]byte, size)
	const writers = 2
	var ru0, ru1 syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru0); err != nil {
		return 0, 0, err
	}
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	var writes, sweeps [writers]int
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sweeps[w] == 0 || time.Now().Before(deadline) && ctx.Err() == nil {
				for i := w; i < len(fds); i += writers {
					// A write the reader has no room for (EAGAIN) is
					// skipped: the sweep goes on.
					if _, err := syscall.Write(fds[i], msg); err == nil {
						writes[w]++
					}
				}
				sweeps[w]++
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru1); err != nil {
		return 0, 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	total := writes[0] + writes[1]
	if total == 0 {
		return 0, 0, errors.New("no write went through")
	}
	cpu := time.Duration(ru1.Utime.Nano() - ru0.Utime.Nano() + ru1.Stime.Nano() - ru0.Stime.Nano())
	return elapsed * writers / time.Duration(sweeps[0]+sweeps[1]), cpu / time.Duration(total), nil
}
