package codec

import "fmt"

// Defaults for Config. A zero field of Config takes its default.
const (
	// DefaultBatchRows bounds the rows of one record batch: the unit a
	// PartReader decodes at a time.
	DefaultBatchRows = 8192
	// DefaultBatchBytes is the soft bound on the decoded size of one record
	// batch (see Config.BatchBytes).
	DefaultBatchBytes = 4 << 20
	// DefaultMaxBatchDecodedBytes is the hard bound on the memory that
	// decoding one record batch may need.
	DefaultMaxBatchDecodedBytes = 256 << 20
)

// Config tunes the codec. The zero value is valid: every zero field takes
// its Default* value. Encoding parameters only change how a part is cut into
// record batches; every part is readable by any Config whose
// MaxBatchDecodedBytes is at least the writer's.
type Config struct {
	// BatchRows is the most rows written to one record batch.
	BatchRows int
	// BatchBytes is the soft limit on the estimated decoded size of one
	// record batch (Arrow buffers plus the Go rows). A batch is cut before
	// the row that would cross it, so one batch exceeds it only when a single
	// row does.
	BatchBytes int
	// MaxBatchDecodedBytes is the hard limit, checked before anything is
	// allocated, on what one record batch may need to decode: its
	// decompressed Arrow buffers plus the Go row slabs. Decoding a batch that
	// declares more fails with ErrTooLarge, so a corrupt or hostile header
	// cannot make the reader allocate gigabytes. Encoding a row whose
	// estimate alone exceeds it fails the same way. At most 1 GiB, so Arrow's
	// 32-bit string offsets always suffice.
	MaxBatchDecodedBytes int64
}

// maxBatchDecodedBytesLimit keeps every batch's string data addressable by
// int32 Arrow offsets.
const maxBatchDecodedBytesLimit = 1 << 30

// Validate reports the first field of c that is out of range.
func (c Config) Validate() error {
	switch {
	case c.BatchRows < 0:
		return fmt.Errorf("%w: codec config: BatchRows %d is negative", ErrInvalidInput, c.BatchRows)
	case c.BatchBytes < 0:
		return fmt.Errorf("%w: codec config: BatchBytes %d is negative", ErrInvalidInput, c.BatchBytes)
	case c.MaxBatchDecodedBytes < 0 || c.MaxBatchDecodedBytes > maxBatchDecodedBytesLimit:
		return fmt.Errorf("%w: codec config: MaxBatchDecodedBytes %d is outside [0, %d]",
			ErrInvalidInput, c.MaxBatchDecodedBytes, maxBatchDecodedBytesLimit)
	}
	w := c.withDefaults()
	if int64(w.BatchBytes) > w.MaxBatchDecodedBytes {
		return fmt.Errorf("%w: codec config: BatchBytes %d exceeds MaxBatchDecodedBytes %d",
			ErrInvalidInput, w.BatchBytes, w.MaxBatchDecodedBytes)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.BatchRows == 0 {
		c.BatchRows = DefaultBatchRows
	}
	if c.BatchBytes == 0 {
		c.BatchBytes = DefaultBatchBytes
	}
	if c.MaxBatchDecodedBytes == 0 {
		c.MaxBatchDecodedBytes = DefaultMaxBatchDecodedBytes
	}
	return c
}
