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
