package persist

import (
	"context"
	"runtime"
)

// Part encodings and compactions are the large transient holders of the
// write path: encoding a part creates a zstd encoder (arrow-go's, one per
// part, which cannot be reused or sized) whose history buffer alone is
// 16 MiB once a part passes 128 KiB, next to the part's Arrow buffers and
// its compressed bytes; a compaction buffers a part's worth of merged
// updates before it encodes them. Unbounded, eight shards compacting at
// once while their writers append took over 100 MiB that no memory budget
// saw. So encodes and compactions take slots (bounded concurrency: they
// are CPU-bound, more at once gains nothing), and what they hold is charged
// to Config.Memory while they hold it.

// encodeCost estimates the bytes encoding a part of raw bytes (rowSize's
// estimate) allocates: the zstd encoder's state (a 1 MiB history and its
// tables up to 128 KiB of input, a 16 MiB history past it) and about 2.5
// times the input in Arrow and compressed buffers. Measured on arrow-go
// v18 with 4 KiB text rows: 2.6 MiB for 32 KB, 20.6 MiB for 256 KB, 38 MB
// for 8 MB.
func encodeCost(raw int) int64 {
	base := int64(5 << 19) // 2.5 MiB
	if raw > smallEncode {
		base = 39 << 19 // 19.5 MiB
	}
	return base + int64(raw)*5/2
}

// smallEncode is the largest raw size whose encoding keeps zstd's small
// history: such encodings (an INSERT's part) take no slot, so that a
// write never waits behind a compaction's encoding; the writers in
// flight bound them.
const smallEncode = 128 << 10

// defaultSlots is the default of Config.MaxConcurrentEncodes and
// Config.MaxConcurrentCompactions: one per two CPUs, at least one.
func defaultSlots() int { return max(1, runtime.GOMAXPROCS(0)/2) }

// slots is a counting semaphore.
type slots chan struct{}

// acquire takes a slot, or fails with ctx's error.
func (s slots) acquire(ctx context.Context) error {
	select {
	case s <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release gives a slot back.
func (s slots) release() { <-s }

// charge counts n bytes held by the write path (negative: released).
func (c *Client) charge(n int64) { c.cfg.Memory.Add(n) }
