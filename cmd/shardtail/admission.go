package main

import (
	"fmt"
	"log/slog"
	"syscall"
)

// Descriptors kept back from clients when --max-connections is derived
// from RLIMIT_NOFILE: blob files being read and written, the SQLite
// consensus and its journal, S3 and Postgres sockets, the HTTP port, the
// listener, and pgwire's refusals in flight (at most 64). A tenth of the
// limit scales with deployments that raise it; 256 keeps a small limit
// usable.
const (
	minFileReserve      = 256
	fileReserveFraction = 10 // a 1/fileReserveFraction share of the limit
)

// raiseFileLimit raises the soft RLIMIT_NOFILE to the hard limit and returns
// the soft limit in force. The Go runtime does the same at start; doing it
// here again makes the derived --max-connections independent of that. The
// hard limit is left as the operator set it.
func raiseFileLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("getrlimit: %w", err)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return 0, fmt.Errorf("setrlimit: %w", err)
		}
	}
	return lim.Cur, nil
}

// defaultMaxConnections derives --max-connections from the file limit:
// what is left after the storage reserve, divided by the descriptors one
// connection needs (1, or 2 for a tail process, whose sessions each hold an
// upstream connection). It is at least 1.
func defaultMaxConnections(nofile uint64, fdsPerConn int) (conns int, reserve uint64) {
	reserve = max(minFileReserve, nofile/fileReserveFraction)
	if nofile <= reserve {
		return 1, reserve
	}
	// Bounded by what an int holds (RLIM_INFINITY is 2^64-1).
	avail := min((nofile-reserve)/uint64(fdsPerConn), 1<<31-1)
	return max(1, int(avail)), reserve
}

// maxConnections returns the pgwire connection limit: --max-connections,
// or the default derived from the file limit, which it raises first.
func maxConnections(cfg serveConfig, log *slog.Logger) (int, error) {
	if cfg.MaxConnections < 0 {
		return 0, fmt.Errorf("--max-connections %d: must not be negative", cfg.MaxConnections)
	}
	nofile, err := raiseFileLimit()
	if err != nil {
		return 0, err
	}
	fdsPerConn := 1
	if cfg.Upstream != "" {
		fdsPerConn = 2
	}
	derived, reserve := defaultMaxConnections(nofile, fdsPerConn)
	if cfg.MaxConnections == 0 {
		return derived, nil
	}
	if cfg.MaxConnections > derived {
		log.Warn("--max-connections leaves storage less than its reserve of file descriptors: writes may fail with \"too many open files\"",
			"max_connections", cfg.MaxConnections, "rlimit_nofile", nofile, "reserve", reserve, "derived_max", derived)
	}
	return cfg.MaxConnections, nil
}
