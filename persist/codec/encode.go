package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/endian"

	"github.com/shardtail/shardtail/row"
)

// Stats describes an encoded part; persist keeps it in State next to the
// part's key.
type Stats struct {
	// Rows is the number of updates in the part.
	Rows int64
	// Bytes is the encoded size of the part.
	Bytes int64
	// MinT and MaxT are the least and greatest update times; both 0 for an
	// empty part.
	MinT, MaxT uint64
}

// EncodePart encodes updates, a consolidated run of rows of schema, as a
// part using the default Config. See Config.EncodePart.
func EncodePart(schema row.Schema, updates []row.Update) ([]byte, Stats, error) {
	return Config{}.EncodePart(schema, updates)
}

// EncodePart encodes updates as a part of schema and returns its bytes and
// Stats. updates must be consolidated (row.IsConsolidated: sorted by row then
// time, no duplicate (row, time), no zero diff) and every row must fit the
// schema: datums of the right Go type, no NULL in a non-nullable column,
// valid UTF-8 text, canonical numeric, valid JSON. Otherwise it returns an
// error wrapping ErrInvalidInput and writes nothing: a part the reader would
// reject is never produced. An empty updates is allowed and yields a valid
// part of zero record batches.
//
// EncodePart does not retain or modify updates.
func (c Config) EncodePart(schema row.Schema, updates []row.Update) ([]byte, Stats, error) {
	if err := c.Validate(); err != nil {
		return nil, Stats{}, err
	}
	c = c.withDefaults()
	if err := schema.Validate(); err != nil {
		return nil, Stats{}, fmt.Errorf("%w: encode part: schema: %v", ErrInvalidInput, err)
	}
	if endian.IsBigEndian {
		// Parts are little-endian (see doc.go); decoding rejects others.
		return nil, Stats{}, errors.New("encode part: big-endian hosts are not supported")
	}
	stats, err := checkUpdates(schema, updates)
	if err != nil {
		return nil, Stats{}, fmt.Errorf("encode part: %w", err)
	}
	cuts, err := c.cutBatches(schema, updates)
	if err != nil {
		return nil, Stats{}, fmt.Errorf("encode part: %w", err)
	}

	batches := make([][]row.Update, len(cuts))
	lo := 0
	for i, hi := range cuts {
		batches[i], lo = updates[lo:hi], hi
	}
	data := writeBatches(schema, batches)
	stats.Bytes = int64(len(data))
	return data, stats, nil
}

// writeBatches writes each batch as one record batch of an Arrow IPC file.
// It does not check the updates.
func writeBatches(schema row.Schema, batches [][]row.Update) []byte {
	rows := 0
	for _, b := range batches {
		rows += len(b)
	}
	w := newPartWriter(schema, rows)
	enc := newBatchEncoder(schema)
	for _, b := range batches {
		enc.encode(b)
		w.write(len(b), enc.nulls, enc.out)
	}
	return w.finish()
}

// checkUpdates checks that updates fit schema and are consolidated, and
// returns their stats. It checks the datum types before comparing rows,
// because row.CompareDatum panics on mismatched types.
func checkUpdates(schema row.Schema, updates []row.Update) (Stats, error) {
	st := Stats{Rows: int64(len(updates))}
	if len(updates) > 0 {
		st.MinT = math.MaxUint64
	}
	for i, u := range updates {
		if err := row.CheckRow(schema, u.Row); err != nil {
			return Stats{}, fmt.Errorf("%w: update %d: %v", ErrInvalidInput, i, err)
		}
		for ci, col := range schema.Columns {
			if s, ok := textDatum(u.Row[ci]); ok {
				if err := checkText(col.Type, s); err != nil {
					return Stats{}, fmt.Errorf("%w: update %d: column %q: %v", ErrInvalidInput, i, col.Name, err)
				}
			}
		}
		if u.Diff == 0 {
			return Stats{}, fmt.Errorf("%w: update %d: zero diff (not consolidated)", ErrInvalidInput, i)
		}
		if i > 0 && row.CompareUpdate(updates[i-1], u) >= 0 {
			return Stats{}, fmt.Errorf("%w: update %d: not after update %d (not sorted and consolidated)", ErrInvalidInput, i, i-1)
		}
		st.MinT = min(st.MinT, u.T)
		st.MaxT = max(st.MaxT, u.T)
	}
	return st, nil
}

// textDatum returns the string of a text-like datum.
func textDatum(d row.Datum) (string, bool) {
	switch v := d.(type) {
	case string:
		return v, true
	case row.Numeric:
		return string(v), true
	case row.JSON:
		return string(v), true
	}
	return "", false
}

// batchEstimate is how a batch's decoded size is estimated: a fixed cost
// per batch plus, per row, a fixed cost and twice the bytes of its
// variable-width values (the Arrow buffer and the Go copy). It over-counts
// what checkBatchLayout charges, so every batch the encoder writes decodes
// under the same MaxBatchDecodedBytes.
type batchEstimate struct {
	perBatch int64
	perRow   int64
	varCols  []int
}

func newBatchEstimate(schema row.Schema) batchEstimate {
	ncols := int64(len(schema.Columns))
	e := batchEstimate{
		// Up to three buffers per column, each rounded up to 64 bytes by the
		// allocator (and all-null bitmaps padded to 64); offsets have n+1
		// entries.
		perBatch: (ncols+2)*3*64 + ncols*4,
		// The Update, its datums, t and d, and one validity byte per column
		// (8x the real bitmap).
		perRow: updateSize + ncols*datumSize + 16 + ncols,
	}
	for i, c := range schema.Columns {
		switch w := fixedWidth(c.Type); {
		case w < 0:
			e.perRow++
		case w > 0:
			e.perRow += int64(w)
		default:
			e.perRow += 4
			e.varCols = append(e.varCols, i)
		}
	}
	return e
}

func (e batchEstimate) row(r row.Row) int64 {
	n := e.perRow
	for _, i := range e.varCols {
		switch v := r[i].(type) {
		case string:
			n += 2 * int64(len(v))
		case row.Numeric:
			n += 2 * int64(len(v))
		case row.JSON:
			n += 2 * int64(len(v))
		case []byte:
			n += 2 * int64(len(v))
		}
	}
	return n
}

// firstBatchRows bounds a part's first record batch: a reader decodes a
// record batch whole before it yields any of its rows, so a small first
// batch lets a snapshot's first rows (a FETCH 10, a COPY's first row) wait
// for a few hundred rows' decode rather than BatchRows'. It costs one more
// batch header per part.
const firstBatchRows = 256

// cutBatches returns the end index of each record batch.
func (c Config) cutBatches(schema row.Schema, updates []row.Update) ([]int, error) {
	est := newBatchEstimate(schema)
	var cuts []int
	start, size := 0, est.perBatch
	limit := min(c.BatchRows, firstBatchRows)
	for i, u := range updates {
		rs := est.row(u.Row)
		if est.perBatch+rs > c.MaxBatchDecodedBytes {
			return nil, fmt.Errorf("%w: update %d needs ~%d bytes to decode, limit %d", ErrTooLarge, i, est.perBatch+rs, c.MaxBatchDecodedBytes)
		}
		if i > start && (i-start >= limit || size+rs > int64(c.BatchBytes)) {
			limit = c.BatchRows
			cuts = append(cuts, i)
			start, size = i, est.perBatch
		}
		size += rs
	}
	if len(updates) > start {
		cuts = append(cuts, len(updates))
	}
	return cuts, nil
}

// batchEncoder turns runs of updates into the buffers of Arrow record
// batches. Its buffers are reused from batch to batch: partWriter.write
// copies or compresses them into the part before the next.
type batchEncoder struct {
	cols []row.Column
	bufs [][3][]byte // per field: validity, values or offsets, data
	// nulls and out are the last batch's null count per field and its
	// buffers in IPC order (see partWriter.write).
	nulls []int64
	out   [][]byte
}

func newBatchEncoder(schema row.Schema) *batchEncoder {
	return &batchEncoder{
		cols: schema.Columns,
		bufs: make([][3][]byte, len(schema.Columns)+2),
	}
}

// grow returns b resized to n zeroed bytes, reusing its array.
func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	b = b[:n]
	clear(b)
	return b
}

// encode sets e.nulls and e.out to the record batch of us.
func (e *batchEncoder) encode(us []row.Update) {
	n := len(us)
	e.nulls, e.out = e.nulls[:0], e.out[:0]
	for ci, col := range e.cols {
		e.column(ci, col.Type, us)
	}

	tb := grow(e.bufs[len(e.cols)][1], n*8)
	db := grow(e.bufs[len(e.cols)+1][1], n*8)
	for i, u := range us {
		binary.LittleEndian.PutUint64(tb[8*i:], u.T)
		binary.LittleEndian.PutUint64(db[8*i:], uint64(u.Diff))
	}
	e.bufs[len(e.cols)][1], e.bufs[len(e.cols)+1][1] = tb, db
	e.nulls = append(e.nulls, 0, 0)
	e.out = append(e.out, nil, tb, nil, db)
}

// column appends the null count and buffers of column ci.
func (e *batchEncoder) column(ci int, t row.Type, us []row.Update) {
	n := len(us)
	b := &e.bufs[ci]
	validity := grow(b[0], (n+7)/8)
	b[0] = validity
	nulls := 0
	for i, u := range us {
		if u.Row[ci] == nil {
			nulls++
		} else {
			bitutil.SetBit(validity, i)
		}
	}
	e.nulls = append(e.nulls, int64(nulls))
	if nulls == 0 {
		validity = nil // all valid: an empty bitmap
	}

	if w := fixedWidth(t); w != 0 {
		var values []byte
		if w < 0 {
			values = grow(b[1], (n+7)/8)
		} else {
			values = grow(b[1], n*w)
		}
		b[1] = values
		for i, u := range us {
			switch v := u.Row[ci].(type) {
			case nil:
			case bool:
				if v {
					bitutil.SetBit(values, i)
				}
			case int16:
				binary.LittleEndian.PutUint16(values[2*i:], uint16(v))
			case int32:
				binary.LittleEndian.PutUint32(values[4*i:], uint32(v))
			case int64:
				binary.LittleEndian.PutUint64(values[8*i:], uint64(v))
			case float32:
				binary.LittleEndian.PutUint32(values[4*i:], math.Float32bits(v))
			case float64:
				binary.LittleEndian.PutUint64(values[8*i:], math.Float64bits(v))
			case row.Timestamp:
				binary.LittleEndian.PutUint64(values[8*i:], uint64(v))
			case row.TimestampTZ:
				binary.LittleEndian.PutUint64(values[8*i:], uint64(v))
			case row.Date:
				binary.LittleEndian.PutUint32(values[4*i:], uint32(v))
			case row.UUID:
				copy(values[16*i:], v[:])
			}
		}
		e.out = append(e.out, validity, values)
		return
	}

	offsets := grow(b[1], 4*(n+1))
	// The data's size first, so that it is allocated once at its size:
	// appended from empty, a batch's few MiB of text went through every
	// growth step of append (about 5x its size allocated, since large
	// slices grow by a quarter), half of what a compaction allocated.
	size := 0
	for _, u := range us {
		switch v := u.Row[ci].(type) {
		case string:
			size += len(v)
		case row.Numeric:
			size += len(v)
		case row.JSON:
			size += len(v)
		case []byte:
			size += len(v)
		}
	}
	data := b[2][:0]
	if cap(data) < size {
		data = make([]byte, 0, size)
	}
	for i, u := range us {
		switch v := u.Row[ci].(type) {
		case string:
			data = append(data, v...)
		case row.Numeric:
			data = append(data, v...)
		case row.JSON:
			data = append(data, v...)
		case []byte:
			data = append(data, v...)
		}
		binary.LittleEndian.PutUint32(offsets[4*(i+1):], uint32(len(data)))
	}
	b[1], b[2] = offsets, data
	e.out = append(e.out, validity, offsets, data)
}
