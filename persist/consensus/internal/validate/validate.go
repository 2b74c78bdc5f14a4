package validate

import (
	"fmt"
	"math"

	"github.com/shardtail/shardtail/persist"
)

// MaxSeqNo is the largest SeqNo a backend stores: the SQL backends keep
// SeqNos in a signed 64-bit column (persist.SeqNo's documented range).
const MaxSeqNo = persist.SeqNo(math.MaxInt64)

// CompareAndSet checks the arguments of Consensus.CompareAndSet: new.SeqNo
// must fit in [0, MaxSeqNo] and, when expected is set, exceed it. A CAS
// that passes can still mismatch; one that fails could never commit, so it
// is the caller's bug rather than a lost race, and the backend returns the
// error instead of (false, nil).
func CompareAndSet(expected *persist.SeqNo, new persist.VersionedData) error {
	if new.SeqNo > MaxSeqNo {
		return fmt.Errorf("%w: seqno %d beyond %d", ErrInvalidArgument, uint64(new.SeqNo), uint64(MaxSeqNo))
	}
	if expected != nil && new.SeqNo <= *expected {
		return fmt.Errorf("%w: new seqno %s must be greater than expected %s", ErrInvalidArgument, new.SeqNo, *expected)
	}
	return nil
}

// Limit checks Consensus.Scan's limit; 0 is valid and yields no versions.
func Limit(limit int) error {
	if limit < 0 {
		return fmt.Errorf("%w: negative scan limit %d", ErrInvalidArgument, limit)
	}
	return nil
}
