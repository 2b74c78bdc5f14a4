package sqlite

import (
	"errors"
	"fmt"
	"time"
)

const (
	// DefaultBusyTimeout is Config.BusyTimeout's default: long enough to
	// ride out another process's write and fsync, short enough that a stuck
	// process shows up as an error.
	DefaultBusyTimeout = 5 * time.Second

	// DefaultMaxReaders is Config.MaxReaders's default.
	DefaultMaxReaders = 4
)

// Config configures a SQLite Consensus.
type Config struct {
	// Path is the database file. It and its table are created if missing.
	// Several processes on one host may open the same file; a network file
	// system may not work (WAL mode needs shared memory).
	Path string

	// BusyTimeout is how long a statement waits for another process's lock
	// before failing with a determinate error. Zero means DefaultBusyTimeout.
	BusyTimeout time.Duration

	// MaxReaders is how many connections serve Head, Scan and ListKeys at
	// once. Zero means DefaultMaxReaders.
	MaxReaders int
}

// Validate reports the first field that is wrong and why.
func (c Config) Validate() error {
	switch {
	case c.Path == "":
		return errors.New("sqlite config: Path is empty")
	case c.BusyTimeout < 0:
		return fmt.Errorf("sqlite config: BusyTimeout %v is negative", c.BusyTimeout)
	case c.BusyTimeout%time.Millisecond != 0:
		return fmt.Errorf("sqlite config: BusyTimeout %v is not a whole number of milliseconds", c.BusyTimeout)
	case c.MaxReaders < 0:
		return fmt.Errorf("sqlite config: MaxReaders %d is negative", c.MaxReaders)
	}
	return nil
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.BusyTimeout == 0 {
		c.BusyTimeout = DefaultBusyTimeout
	}
	if c.MaxReaders == 0 {
		c.MaxReaders = DefaultMaxReaders
	}
	return c
}
