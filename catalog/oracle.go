package catalog

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/shardtail/shardtail/persist"
)

// oracleKey is the consensus key of the timestamp oracle's reservation.
const oracleKey = "timestamp_oracle"

// oracleReserve is how far ahead of the clock the oracle reserves: one
// durable write per this much time, not per timestamp.
const oracleReserve = 5 * time.Second

// Oracle issues write timestamps: epoch milliseconds, strictly increasing,
// never going backwards across restarts even if the clock does. It persists
// a reservation ("no timestamp above R was issued") in consensus and issues
// timestamps up to it from memory, renewing it before passing it.
type Oracle struct {
	consensus persist.Consensus
	now       func() int64

	mu       sync.Mutex
	last     uint64        // mu: the last timestamp issued
	reserved uint64        // mu: durable bound on issued timestamps
	seq      persist.SeqNo // mu
}

// OpenOracle loads the reservation: every timestamp issued from now on is
// above every timestamp any earlier process issued.
func OpenOracle(ctx context.Context, c persist.Consensus, now func() int64) (*Oracle, error) {
	if now == nil {
		now = func() int64 { return time.Now().UnixMilli() }
	}
	o := &Oracle{consensus: c, now: now}
	head, err := c.Head(ctx, oracleKey)
	if err != nil {
		return nil, fmt.Errorf("read timestamp oracle: %w", err)
	}
	if head != nil {
		if len(head.Data) != 8 {
			return nil, fmt.Errorf("%w: timestamp oracle value of %d bytes", persist.ErrCorruptState, len(head.Data))
		}
		o.reserved = binary.BigEndian.Uint64(head.Data)
		o.last = o.reserved
		o.seq = head.SeqNo
	}
	return o, nil
}

// WriteTS returns a new timestamp above every one issued before and at
// least min.
func (o *Oracle) WriteTS(ctx context.Context, min uint64) (uint64, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	t := max(uint64(o.now()), o.last+1, min)
	if t > o.reserved {
		if err := o.reserve(ctx, t+uint64(oracleReserve.Milliseconds())); err != nil {
			return 0, err
		}
	}
	o.last = t
	return t, nil
}

// Peek returns the last timestamp issued.
func (o *Oracle) Peek() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.last
}

// reserve durably raises the reservation to r. o.mu must be held.
func (o *Oracle) reserve(ctx context.Context, r uint64) error {
	var data [8]byte
	binary.BigEndian.PutUint64(data[:], r)
	var expected *persist.SeqNo
	if o.seq > 0 {
		seq := o.seq
		expected = &seq
	}
	ok, err := o.consensus.CompareAndSet(ctx, oracleKey, expected, persist.VersionedData{SeqNo: o.seq + 1, Data: data[:]})
	if err != nil {
		return fmt.Errorf("reserve timestamps: %w", err)
	}
	if !ok {
		// Another process (a previous incarnation that is still running,
		// or a concurrent one) moved it: adopt its reservation and retry.
		head, err := o.consensus.Head(ctx, oracleKey)
		if err != nil || head == nil {
			return fmt.Errorf("reserve timestamps: lost a race and cannot read the winner: %v", err)
		}
		o.seq = head.SeqNo
		o.reserved = binary.BigEndian.Uint64(head.Data)
		o.last = max(o.last, o.reserved)
		return o.reserve(ctx, max(r, o.reserved+1))
	}
	o.seq++
	o.reserved = r
	if o.seq%256 == 0 {
		_, _ = o.consensus.Truncate(ctx, oracleKey, o.seq)
	}
	return nil
}
