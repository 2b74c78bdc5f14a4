package row

// updateOverhead is an Update's own bytes beyond its datums: the Row slice
// header, Time and Diff.
const updateOverhead = 48

// Size estimates the bytes r's datums occupy in memory: each interface
// value and the bytes it points to. Byte budgets (queue limits, result
// size limits) count with it, so it is an estimate that stays the same
// from release to release rather than an exact measure.
func (r Row) Size() int64 {
	var n int64
	for _, d := range r {
		n += datumSize(d)
	}
	return n
}

// Size estimates the bytes u occupies in memory (see Row.Size).
func (u Update) Size() int64 { return updateOverhead + u.Row.Size() }

// datumSize estimates the bytes a datum occupies in memory.
func datumSize(d Datum) int64 {
	switch v := d.(type) {
	case string:
		return 16 + int64(len(v))
	case []byte:
		return 24 + int64(len(v))
	case Numeric:
		return 16 + int64(len(v))
	case JSON:
		return 16 + int64(len(v))
	}
	return 16
}
