package formatter

import "fmt"

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
