package formatter

import "fmt"

// BufferError ends a subscribe whose client fell behind: its backlog went
// over subscribe_max_buffered_bytes and (on the fast path) the position it
// had reached is no longer retained.
type BufferError struct {
	Buffered, Max int64
}

func (e *BufferError) Error() string {
	return fmt.Sprintf("SUBSCRIBE fell behind: the client did not read results fast enough, so its backlog reached %d bytes, exceeding the %d byte budget", e.Buffered, e.Max)
}

// SQLState is 53200 (out_of_memory), as Materialize reports it.
func (e *BufferError) SQLState() string { return "53200" }

// ResultSizeError ends a subscribe whose buffered timestamp went over
// max_result_size: WITHIN TIMESTAMP ORDER BY and the envelopes hold a
// timestamp's updates until all of them are known (a snapshot of any size
// is one timestamp).
type ResultSizeError struct {
	Size, Max int64
}

func (e *ResultSizeError) Error() string {
	return fmt.Sprintf("result exceeds max size of %d bytes (buffered %d bytes of one timestamp)", e.Max, e.Size)
}

// SQLState is 53200 (out_of_memory), as Materialize reports
// max_result_size.
func (e *ResultSizeError) SQLState() string { return "53200" }
