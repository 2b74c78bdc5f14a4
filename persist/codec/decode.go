package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/klauspost/compress/zstd"

	"github.com/shardtail/shardtail/row"
)

// DecodePart decodes a whole part of schema using the default Config. See
// Config.DecodePart.
func DecodePart(schema row.Schema, data []byte) ([]row.Update, error) {
	return Config{}.DecodePart(schema, data)
}

// DecodePart decodes every update of a part of schema. It holds the whole
// part in memory; use NewPartReader to hold one record batch at a time.
// The result is consolidated and owns its memory (see PartReader.Next).
func (c Config) DecodePart(schema row.Schema, data []byte) ([]row.Update, error) {
	r, err := c.NewPartReader(schema, data)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	// Rows agrees with the batch headers, but no data backs it yet: a
	// corrupt part could claim ~1000 rows per byte. Cap the up-front
	// allocation at one row per 8 bytes of input (real parts use more) and
	// let append grow past it.
	out := make([]row.Update, 0, min(r.Rows(), int64(len(data)/8)))
	for {
		out, err = r.AppendNext(out)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// NewPartReader opens a part of schema for streaming decode with the
// default Config. See Config.NewPartReader.
func NewPartReader(schema row.Schema, data []byte) (*PartReader, error) {
	return Config{}.NewPartReader(schema, data)
}

// NewPartReader checks the part's framing, footer, schema and every record
// batch header, then returns a reader that decodes one batch per Next. It
// fails with ErrSchemaMismatch if the part was written for another schema,
// ErrUnsupportedVersion for another format version, ErrTooLarge if a batch
// would need more than MaxBatchDecodedBytes, and ErrCorrupt otherwise.
//
// data must not be modified while the reader is in use: buffers are read
// from it in place. Decoded updates never alias it.
func (c Config) NewPartReader(schema row.Schema, data []byte) (r *PartReader, err error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	if err := schema.Validate(); err != nil {
		return nil, fmt.Errorf("%w: decode part: schema: %v", ErrInvalidInput, err)
	}
	defer func() {
		// Every read is bounds-checked; this only turns a missed case into
		// an error instead of a crash of the whole server.
		if p := recover(); p != nil {
			r, err = nil, fmt.Errorf("%w: decode part: %v", ErrCorrupt, p)
		}
	}()
	fi, err := readFooter(data)
	if err != nil {
		return nil, fmt.Errorf("decode part: %w", err)
	}
	r = &PartReader{schema: schema, data: data, blocks: fi.blocks, metas: make([]batchMeta, len(fi.blocks))}
	if r.rows, err = checkSchema(schema, fi); err != nil {
		return nil, fmt.Errorf("decode part: %w", err)
	}
	var total int64
	for i, blk := range fi.blocks {
		m, err := readBatchMessage(data, blk)
		if err == nil {
			err = c.checkBatchLayout(schema.Columns, m, r.body(blk))
		}
		if err != nil {
			return nil, fmt.Errorf("decode part: batch %d: %w", i, err)
		}
		r.metas[i] = m
		total += m.length // m.length <= MaxBatchDecodedBytes: no overflow
	}
	if r.rows != total {
		return nil, fmt.Errorf("%w: decode part: header says %d rows, batches hold %d", ErrCorrupt, r.rows, total)
	}
	return r, nil
}

// PartReader decodes a part one record batch at a time, so that a caller
// (the snapshot cursor) holds a bounded window of it. It checks that the
// updates are consolidated across batches too. It is not safe for
// concurrent use.
type PartReader struct {
	schema  row.Schema
	data    []byte
	blocks  []fileBlock
	metas   []batchMeta
	rows    int64
	next    int
	last    row.Update // deep copy of the previous batch's last update
	scratch [][]byte   // decompressed buffers, reused from batch to batch
	err     error      // sticky: io.EOF or the first error
}

func (r *PartReader) body(blk fileBlock) []byte {
	start := blk.offset + int64(blk.meta)
	return r.data[start : start+blk.body]
}

// Rows returns the number of updates in the part.
func (r *PartReader) Rows() int64 { return r.rows }

// NumBatches returns the number of record batches in the part; Next
// returns each of them once, in order.
func (r *PartReader) NumBatches() int { return len(r.blocks) }

// Next decodes and returns the next record batch's updates, or io.EOF after
// the last one. After an error, Next returns that error again.
//
// The updates own their memory and never alias the part's bytes: each
// batch decodes into fresh slabs (one []row.Datum for all its rows, one
// string or []byte per variable-width column). Rows of one batch share
// those slabs, so holding one row of a batch keeps the batch's slabs alive;
// copy a row's strings and bytes to retain it alone.
func (r *PartReader) Next() ([]row.Update, error) {
	return r.AppendNext(nil)
}

// AppendNext is Next appending the batch's updates to dst, so that a caller
// that is done with the previous batch's slice can decode into it again
// (the rows themselves are always fresh, as Next says). On an error dst
// comes back unchanged.
func (r *PartReader) AppendNext(dst []row.Update) ([]row.Update, error) {
	if r.err != nil {
		return dst, r.err
	}
	if r.next == len(r.blocks) {
		r.fail(io.EOF)
		return dst, io.EOF
	}
	i := r.next
	r.next++
	out, err := r.decodeBatch(i, dst)
	if err != nil {
		err = fmt.Errorf("decode part: batch %d: %w", i, err)
		r.fail(err)
		return dst, err
	}
	return out, nil
}

func (r *PartReader) fail(err error) {
	r.err = err
	r.scratch = nil
}

// Close releases the reader's buffers; Next afterwards returns an error.
// Calling it is optional (a reader holds only Go memory) and safe more than
// once.
func (r *PartReader) Close() error {
	if r.err == nil {
		r.fail(errors.New("decode part: reader closed"))
	}
	return nil
}

// zstdDecoder decompresses buffers for every reader. DecodeAll is safe for
// concurrent use and, with the cap limit, never writes past the capacity it
// is given: the size checkBatchLayout already charged.
var zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
	d, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0),
		zstd.WithDecodeAllCapLimit(true),
		zstd.WithDecoderMaxMemory(maxBatchDecodedBytesLimit))
	if err != nil {
		panic(fmt.Sprintf("codec: zstd decoder options: %v", err)) // static options
	}
	return d
})

// buffers returns batch i's buffers, decompressed into r.scratch, except
// those for which keep(bi) is true (the values of text columns): they
// decompress into new memory that the decoded values then use as they
// are, instead of a copy of a reused buffer. fresh[bi] reports whether
// buffer bi is such new memory (not the part's bytes, not scratch).
func (r *PartReader) buffers(i int, keep func(bi int) bool) (out [][]byte, fresh []bool, err error) {
	m := &r.metas[i]
	body := r.body(r.blocks[i])
	out = make([][]byte, len(m.buffers))
	fresh = make([]bool, len(m.buffers))
	for bi, b := range m.buffers {
		raw := body[b.offset : b.offset+b.length]
		if !m.compressed || len(raw) == 0 {
			out[bi] = raw
			continue
		}
		size := int64(binary.LittleEndian.Uint64(raw)) // checked by checkBatchLayout
		if size == -1 {
			out[bi] = raw[8:]
			continue
		}
		var dst []byte
		if fresh[bi] = keep(bi); !fresh[bi] {
			if bi >= len(r.scratch) {
				r.scratch = append(r.scratch, make([][]byte, bi+1-len(r.scratch))...)
			}
			dst = r.scratch[bi]
		}
		if int64(cap(dst)) < size {
			dst = make([]byte, 0, size)
		}
		dec, err := zstdDecoder().DecodeAll(raw[8:], dst[:0:size])
		if err != nil {
			return nil, nil, fmt.Errorf("%w: buffer %d: zstd: %v", ErrCorrupt, bi, err)
		}
		if int64(len(dec)) != size {
			return nil, nil, fmt.Errorf("%w: buffer %d decompressed to %d bytes, header says %d", ErrCorrupt, bi, len(dec), size)
		}
		if !fresh[bi] {
			r.scratch[bi] = dst
		}
		out[bi] = dec
	}
	return out, fresh, nil
}

// batchVecs decompresses batch i and checks its columns: the vectors of
// the schema's columns, and the raw times and diffs (one little-endian
// 64-bit word per row, never NULL, diffs never 0). owned makes every
// vector and the diffs memory of their own, that nothing writes again
// (for a caller that keeps them, see NextColumns); otherwise only the
// text, numeric and jsonb data are (their values are strings over them),
// and the rest may be the part's bytes or the reader's scratch, valid
// until the next batch.
func (r *PartReader) batchVecs(i int, owned bool) (vecs []row.Vec, ts, ds []byte, err error) {
	m := &r.metas[i]
	cols := r.schema.Columns
	// The buffers that must be new memory: the data buffers of text,
	// numeric and jsonb columns, or when owned every buffer but the
	// times'.
	keep := make([]bool, len(m.buffers))
	bi := 0
	for _, col := range cols {
		k := 2
		if row.VecWidth(col.Type) == 0 {
			k = 3
			keep[bi+2] = col.Type != row.TypeBytea
		}
		for ; k > 0; k-- {
			keep[bi] = keep[bi] || owned
			bi++
		}
	}
	timeAt := bi
	if owned {
		keep[bi+2], keep[bi+3] = true, true // the diffs
	}
	bufs, fresh, err := r.buffers(i, func(bi int) bool { return keep[bi] })
	if err != nil {
		return nil, nil, nil, err
	}
	if owned {
		for bi, b := range bufs {
			if keep[bi] && !fresh[bi] && len(b) > 0 {
				bufs[bi] = bytes.Clone(b) // the part's bytes, lent
			}
		}
	}
	n := int(m.length)
	vecs = make([]row.Vec, len(cols))
	bi = 0
	for ci, col := range cols {
		v := &vecs[ci]
		v.Type, v.Values = col.Type, bufs[bi+1]
		k := 2
		if row.VecWidth(col.Type) == 0 {
			k = 3
			v.Data = bufs[bi+2]
			if !keep[bi+2] || (!fresh[bi+2] && !owned) {
				// Strings and byte slices alias Data: it must be memory
				// of the values' own, not the part's or the scratch.
				v.Data = bytes.Clone(v.Data)
			}
		}
		if err := checkColumn(v, m.nodes[ci].nulls, bufs[bi], n); err != nil {
			return nil, nil, nil, fmt.Errorf("%w: column %q: %v", ErrCorrupt, col.Name, err)
		}
		bi += k
	}
	for _, v := range [][]byte{bufs[timeAt], bufs[timeAt+2]} {
		if len(v) > 0 && bitutil.CountSetBits(v, 0, n) != n {
			return nil, nil, nil, fmt.Errorf("%w: null in column %s or %s", ErrCorrupt, colTime, colDiff)
		}
	}
	ts, ds = bufs[timeAt+1], bufs[timeAt+3]
	for j := range n {
		if binary.LittleEndian.Uint64(ds[8*j:]) == 0 {
			return nil, nil, nil, fmt.Errorf("%w: updates are not sorted and consolidated", ErrCorrupt)
		}
	}
	return vecs, ts, ds, nil
}

// decodeBatch decodes batch i, appending to dst.
func (r *PartReader) decodeBatch(i int, dst []row.Update) (out []row.Update, err error) {
	start := len(dst)
	defer func() {
		if p := recover(); p != nil {
			out, err = dst[:start], fmt.Errorf("%w: %v", ErrCorrupt, p)
		}
	}()
	vecs, ts, ds, err := r.batchVecs(i, false)
	if err != nil {
		return dst, err
	}
	n := int(r.metas[i].length)
	dst = slices.Grow(dst, n)[:start+n]
	us := dst[start:]
	decodeVecs(vecs, 0, us)
	for j := range us {
		us[j].T = binary.LittleEndian.Uint64(ts[8*j:])
		us[j].Diff = int64(binary.LittleEndian.Uint64(ds[8*j:]))
	}
	if err := r.checkOrder(i, vecs, us, 0); err != nil {
		return dst[:start], err
	}
	return dst, nil
}

// checkOrder checks that batch i's updates are sorted by (row, time) with
// no duplicate pair (row.IsConsolidated), within the batch and after the
// previous batch, and remembers the last one. When the first column holds
// no NULL and strictly increasing integers (ordered), the rows are
// distinct and in order whatever the other columns hold, so only the
// boundaries are compared: us is then nil for a batch read as columns,
// whose first and last rows are read from vecs, at time t.
func (r *PartReader) checkOrder(i int, vecs []row.Vec, us []row.Update, t uint64) error {
	n := int(r.metas[i].length)
	if us != nil && !ordered(vecs, n) && !row.IsConsolidated(us) {
		return fmt.Errorf("%w: updates are not sorted and consolidated", ErrCorrupt)
	}
	first, last := row.Update{}, row.Update{}
	if us != nil {
		first, last = us[0], us[n-1]
	} else {
		c := row.Columns{Vecs: vecs}
		first, last = row.Update{Row: c.Row(0), T: t}, row.Update{Row: c.Row(n - 1), T: t}
	}
	if i > 0 && row.CompareUpdate(r.last, first) >= 0 {
		return fmt.Errorf("%w: first update does not follow the previous batch", ErrCorrupt)
	}
	r.last = CloneUpdate(last)
	return nil
}

// ordered reports whether the first of vecs holds no NULL and n strictly
// increasing integers: the rows are then distinct and in order whatever
// the other columns hold.
func ordered(vecs []row.Vec, n int) bool {
	return len(vecs) > 0 && vecs[0].Valid == nil && increasing(vecs[0].Type, vecs[0].Values, n)
}

// NextColumns decodes the next record batch as Next does, but returns it
// as columns (row.Columns), all of them memory of their own: no datum per
// value. The batch's updates must all be at one time, the columns' T. A
// batch read as columns checks its order only where the first column
// holds strictly increasing integers (see checkOrder); otherwise it
// decodes the rows to check them.
func (r *PartReader) NextColumns() (c *row.Columns, err error) {
	if r.err != nil {
		return nil, r.err
	}
	if r.next == len(r.blocks) {
		r.fail(io.EOF)
		return nil, io.EOF
	}
	i := r.next
	r.next++
	defer func() {
		if p := recover(); p != nil {
			c, err = nil, fmt.Errorf("%w: %v", ErrCorrupt, p)
		}
		if err != nil {
			err = fmt.Errorf("decode part: batch %d: %w", i, err)
			r.fail(err)
		}
	}()
	vecs, ts, ds, err := r.batchVecs(i, true)
	if err != nil {
		return nil, err
	}
	n := int(r.metas[i].length)
	t := binary.LittleEndian.Uint64(ts)
	for j := range n {
		if got := binary.LittleEndian.Uint64(ts[8*j:]); got != t {
			return nil, fmt.Errorf("%w: updates at times %d and %d in a batch read as columns", ErrCorrupt, t, got)
		}
	}
	c = &row.Columns{Vecs: vecs, Diffs: ds, T: t, Len: n}
	var us []row.Update
	if !ordered(vecs, n) {
		us = DecodeColumns(c)
	}
	if err := r.checkOrder(i, vecs, us, t); err != nil {
		return nil, err
	}
	return c, nil
}

// SkipBatch skips the next record batch without decoding it: a caller
// that decoded it from the same part before (a cache of parts' first
// batches) has its rows already. last is that batch's last update, which
// the batch after it must follow (see checkOrder). It returns io.EOF
// after the last batch, as Next does.
func (r *PartReader) SkipBatch(last row.Update) error {
	if r.err != nil {
		return r.err
	}
	if r.next == len(r.blocks) {
		r.fail(io.EOF)
		return io.EOF
	}
	r.next++
	r.last = CloneUpdate(last)
	return nil
}

// DecodeColumns returns the updates of c as datums, decoded as
// PartReader.Next decodes a batch: one slab of datums for all rows, and
// strings that alias the columns' memory.
func DecodeColumns(c *row.Columns) []row.Update {
	us := make([]row.Update, c.Len)
	decodeVecs(c.Vecs, c.Off, us)
	for j := range us {
		us[j].T, us[j].Diff = c.T, c.Diff(c.Off+j)
	}
	return us
}

// decodeVecs sets the rows of us from rows off to off+len(us)-1 of vecs:
// one slab of datums holds every row's, and each column's values are
// boxed in a slab of their own.
func decodeVecs(vecs []row.Vec, off int, us []row.Update) {
	n, nc := len(us), len(vecs)
	slab := make([]row.Datum, n*nc)
	for j := range us {
		us[j].Row = slab[j*nc : (j+1)*nc : (j+1)*nc]
	}
	for ci := range vecs {
		decodeVec(&vecs[ci], off, n, slab[ci:], nc)
	}
}

// increasing reports whether the n values of an integer column (of a type
// row.CompareDatum orders by value) strictly increase; false for other
// types.
func increasing(t row.Type, vals []byte, n int) bool {
	le := binary.LittleEndian
	switch t {
	case row.TypeInt2:
		for j := 1; j < n; j++ {
			if int16(le.Uint16(vals[2*j-2:])) >= int16(le.Uint16(vals[2*j:])) {
				return false
			}
		}
	case row.TypeInt4, row.TypeDate:
		for j := 1; j < n; j++ {
			if int32(le.Uint32(vals[4*j-4:])) >= int32(le.Uint32(vals[4*j:])) {
				return false
			}
		}
	case row.TypeInt8, row.TypeTimestamp, row.TypeTimestampTZ:
		for j := 1; j < n; j++ {
			if int64(le.Uint64(vals[8*j-8:])) >= int64(le.Uint64(vals[8*j:])) {
				return false
			}
		}
	default:
		return false
	}
	return true
}

// CloneUpdate deep-copies u so that it does not keep its batch's slabs
// alive (see PartReader.Next).
func CloneUpdate(u row.Update) row.Update {
	c := row.Update{Row: make(row.Row, len(u.Row)), T: u.T, Diff: u.Diff}
	for i, d := range u.Row {
		switch v := d.(type) {
		case string:
			c.Row[i] = strings.Clone(v)
		case row.Numeric:
			c.Row[i] = row.Numeric(strings.Clone(string(v)))
		case row.JSON:
			c.Row[i] = row.JSON(strings.Clone(string(v)))
		case []byte:
			c.Row[i] = bytes.Clone(v)
		default:
			c.Row[i] = v
		}
	}
	return c
}

// checkColumn checks the n values of one column (checkBatchLayout has
// checked the buffer sizes): its validity bitmap validity against the
// null count (v.Valid is then set if there are NULLs), and the values of
// a variable-width column (see checkVarColumn).
func checkColumn(v *row.Vec, nulls int64, validity []byte, n int) error {
	if len(validity) > 0 {
		// Present even with a null count of 0 (our writer omits it then):
		// check it, or a corrupted count would turn NULLs into zeros.
		if got := n - bitutil.CountSetBits(validity, 0, n); int64(got) != nulls {
			return fmt.Errorf("validity bitmap has %d nulls, header says %d", got, nulls)
		}
		if nulls > 0 {
			v.Valid = validity
		}
	}
	if row.VecWidth(v.Type) != 0 {
		return nil
	}
	return checkVarColumn(v, n)
}

// checkVarColumn checks a text, numeric, jsonb or bytea column: offsets
// within the data and never decreasing, and for the text-like types valid
// UTF-8 (with every value boundary on a rune start, so each value is valid
// on its own), canonical numerics and valid JSON.
func checkVarColumn(v *row.Vec, n int) error {
	if len(v.Values) < 4*(n+1) {
		return fmt.Errorf("offsets buffer of %d bytes, want %d", len(v.Values), 4*(n+1))
	}
	le := binary.LittleEndian
	off := func(j int) int { return int(int32(le.Uint32(v.Values[4*j:]))) }
	first, last := off(0), off(n)
	if first < 0 || last > len(v.Data) || first > last {
		return fmt.Errorf("offsets [%d, %d] outside data of %d bytes", first, last, len(v.Data))
	}
	prev := first
	for j := 1; j <= n; j++ {
		o := off(j)
		if o < prev {
			return fmt.Errorf("offset %d of %d decreases", j, o)
		}
		prev = o
	}
	if v.Type == row.TypeBytea {
		return nil
	}
	region := v.Data[first:last]
	if !utf8.Valid(region) {
		return errors.New("text is not valid UTF-8")
	}
	for j := 0; j < n; j++ {
		if o := off(j) - first; o < len(region) && !utf8.RuneStart(region[o]) {
			return fmt.Errorf("value %d starts inside a UTF-8 sequence", j)
		}
	}
	if v.Type == row.TypeText {
		return nil
	}
	for j := range n {
		if !v.Null(j) {
			if err := checkTextValue(v.Type, v.String(j)); err != nil {
				return fmt.Errorf("value %d: %v", j, err)
			}
		}
	}
	return nil
}

// decodeVec decodes rows off to off+n-1 of a checked vector into
// out[j*stride] for row j, leaving NULLs nil. Each type's values are boxed
// in one slab; strings and byte slices alias the vector's data.
func decodeVec(v *row.Vec, off, n int, out []row.Datum, stride int) {
	switch v.Type {
	case row.TypeBool:
		// bool boxes without allocating.
		for j := range n {
			if !v.Null(off + j) {
				out[j*stride] = v.Bool(off + j)
			}
		}
	case row.TypeInt2:
		decodeFixed(v, off, n, out, stride, func(j int) int16 { return int16(v.Uint16(j)) })
	case row.TypeInt4:
		decodeFixed(v, off, n, out, stride, func(j int) int32 { return int32(v.Uint32(j)) })
	case row.TypeInt8:
		decodeFixed(v, off, n, out, stride, func(j int) int64 { return int64(v.Uint64(j)) })
	case row.TypeFloat4:
		decodeFixed(v, off, n, out, stride, func(j int) float32 { return math.Float32frombits(v.Uint32(j)) })
	case row.TypeFloat8:
		decodeFixed(v, off, n, out, stride, func(j int) float64 { return math.Float64frombits(v.Uint64(j)) })
	case row.TypeTimestamp:
		decodeFixed(v, off, n, out, stride, func(j int) row.Timestamp { return row.Timestamp(v.Uint64(j)) })
	case row.TypeTimestampTZ:
		decodeFixed(v, off, n, out, stride, func(j int) row.TimestampTZ { return row.TimestampTZ(v.Uint64(j)) })
	case row.TypeDate:
		decodeFixed(v, off, n, out, stride, func(j int) row.Date { return row.Date(v.Uint32(j)) })
	case row.TypeUUID:
		decodeFixed(v, off, n, out, stride, v.UUID)
	case row.TypeNumeric:
		decodeFixed(v, off, n, out, stride, func(j int) row.Numeric { return row.Numeric(v.String(j)) })
	case row.TypeJSONB:
		decodeFixed(v, off, n, out, stride, func(j int) row.JSON { return row.JSON(v.String(j)) })
	case row.TypeText:
		decodeFixed(v, off, n, out, stride, v.String)
	case row.TypeBytea:
		decodeFixed(v, off, n, out, stride, v.Bytes)
	default:
		panic(fmt.Sprintf("codec: vector of type %v", v.Type))
	}
}

// decodeFixed boxes value(off+j) for each non-NULL row j of v into one
// slab, into out[j*stride].
func decodeFixed[T any](v *row.Vec, off, n int, out []row.Datum, stride int, value func(j int) T) {
	s := newSlab[T](n)
	for j := range n {
		if !v.Null(off + j) {
			out[j*stride] = s.box(j, value(off+j))
		}
	}
}

// checkBatchLayout checks a record batch header against the schema before
// anything is decompressed or allocated: one flat node per column with the
// batch's length, no nulls where the schema forbids them, the right number
// of buffers, each large enough for the batch, and the memory needed to
// decode the batch (decompressed buffers, each rounded up to 64 bytes, plus
// the Go slabs) within MaxBatchDecodedBytes. It reads only the 8-byte size
// prefix of each compressed buffer.
func (c Config) checkBatchLayout(cols []row.Column, m batchMeta, body []byte) error {
	n := m.length
	if n <= 0 || n > c.MaxBatchDecodedBytes/updateSize {
		if n > 0 {
			return fmt.Errorf("%w: %d rows", ErrTooLarge, n)
		}
		return fmt.Errorf("%w: batch of %d rows", ErrCorrupt, n)
	}
	if len(m.nodes) != len(cols)+2 {
		return fmt.Errorf("%w: %d field nodes, want %d", ErrCorrupt, len(m.nodes), len(cols)+2)
	}
	total := n * (updateSize + int64(len(cols))*datumSize)
	bi := 0
	// buf charges and returns the decoded size of the next buffer.
	buf := func() (int64, error) {
		if bi >= len(m.buffers) {
			return 0, fmt.Errorf("%w: too few buffers (%d)", ErrCorrupt, len(m.buffers))
		}
		b := m.buffers[bi]
		bi++
		size := b.length
		if m.compressed && b.length > 0 {
			if b.length < 8 {
				return 0, fmt.Errorf("%w: compressed buffer %d of %d bytes", ErrCorrupt, bi-1, b.length)
			}
			switch raw := int64(binary.LittleEndian.Uint64(body[b.offset:])); {
			case raw == -1: // stored uncompressed
				size = b.length - 8
			case raw < 0 || raw > c.MaxBatchDecodedBytes:
				return 0, fmt.Errorf("%w: buffer %d decompresses to %d bytes", ErrTooLarge, bi-1, raw)
			case raw > (b.length-8)/4*(128<<10):
				// A zstd block of at least 4 bytes yields at most 128 KiB.
				return 0, fmt.Errorf("%w: buffer %d claims %d bytes from %d compressed", ErrCorrupt, bi-1, raw, b.length)
			default:
				size = raw
			}
		}
		total += (size + 63) &^ 63
		return size, nil
	}
	for f := range len(cols) + 2 {
		width, nullable := int64(8), false // t and d
		if f < len(cols) {
			width, nullable = int64(fixedWidth(cols[f].Type)), cols[f].Nullable
		}
		node := m.nodes[f]
		switch {
		case node.length != n:
			return fmt.Errorf("%w: field %d has %d rows, batch %d", ErrCorrupt, f, node.length, n)
		case node.nulls < 0 || node.nulls > n || (node.nulls > 0 && !nullable):
			return fmt.Errorf("%w: field %d has %d nulls", ErrCorrupt, f, node.nulls)
		}
		size, err := buf() // validity
		if err != nil {
			return err
		}
		if (node.nulls > 0 || size > 0) && size < (n+7)/8 {
			return fmt.Errorf("%w: field %d validity of %d bytes", ErrCorrupt, f, size)
		}
		if size, err = buf(); err != nil { // values or offsets
			return err
		}
		var want int64
		switch {
		case width < 0:
			want = (n + 7) / 8
		case width > 0:
			want = n * width
		default:
			want = 4 * (n + 1)
			data, err := buf()
			if err != nil {
				return err
			}
			total += data // the Go copy of the values
		}
		if size < want {
			return fmt.Errorf("%w: field %d buffer of %d bytes, want %d", ErrCorrupt, f, size, want)
		}
		if total > c.MaxBatchDecodedBytes {
			return fmt.Errorf("%w: batch of %d rows needs more than %d bytes to decode", ErrTooLarge, n, c.MaxBatchDecodedBytes)
		}
	}
	if bi != len(m.buffers) {
		return fmt.Errorf("%w: %d buffers, want %d", ErrCorrupt, len(m.buffers), bi)
	}
	return nil
}
