package persist

import (
	"runtime"
)

// Part encodings and compactions are the large transient holders of the
// write path: encoding a part holds its Arrow buffers and its compressed
// bytes; a compaction buffers a part's worth of merged updates before it
// encodes them. Unbounded, eight shards compacting at once while their
// writers append took over 100 MiB that no memory budget saw. So encodes
// and compactions take slots (bounded concurrency: they are CPU-bound,
// more at once gains nothing), and what they hold is charged to
// Config.Memory while they hold it. The zstd state is not per part: every
// part compresses through codec's one shared encoder, whose few encoders
// (one per concurrent call) live as long as the process.

// encodeCost estimates the bytes encoding a part of raw bytes (rowSize's
// estimate) holds at once: about 2.5 times the input in Arrow buffers,
// the part's body and its compressed bytes.
func encodeCost(raw int) int64 {
	return int64(raw) * 5 / 2
}

// smallEncode is the largest raw size whose encoding takes no slot (an
// INSERT's part), so that a write never waits behind a compaction's
// encoding; the writers in flight bound them.
const smallEncode = 128 << 10

// defaultSlots is the default of Config.MaxConcurrentEncodes and
// Config.MaxConcurrentCompactions: one per two CPUs, at least one.
func defaultSlots() int { return max(1, runtime.GOMAXPROCS(0)/2) }

// charge counts n bytes held by the write path (negative: released).
func (c *Client) charge(n int64) { c.cfg.Memory.Add(n) }
