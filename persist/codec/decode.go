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
	"unsafe"

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

// decodeBatch decodes batch i, appending to dst.
func (r *PartReader) decodeBatch(i int, dst []row.Update) (out []row.Update, err error) {
	start := len(dst)
	defer func() {
		if p := recover(); p != nil {
			out, err = dst[:start], fmt.Errorf("%w: %v", ErrCorrupt, p)
		}
	}()
	m := &r.metas[i]
	cols := r.schema.Columns
	// The data buffers of text, numeric and jsonb columns: their values
	// are strings over the decompressed bytes, which must then be memory
	// of their own.
	textData := map[int]bool{}
	for ci, bi := 0, 0; ci < len(cols); ci++ {
		if fixedWidth(cols[ci].Type) != 0 {
			bi += 2
			continue
		}
		if cols[ci].Type != row.TypeBytea {
			textData[bi+2] = true
		}
		bi += 3
	}
	bufs, fresh, err := r.buffers(i, func(bi int) bool { return textData[bi] })
	if err != nil {
		return dst, err
	}
	n := int(m.length)
	nc := len(cols)
	dst = slices.Grow(dst, n)[:start+n]
	us := dst[start:]
	slab := make([]row.Datum, n*nc)
	for j := range us {
		us[j].Row = slab[j*nc : (j+1)*nc : (j+1)*nc]
	}
	bi := 0
	for ci, col := range cols {
		k := 2
		if fixedWidth(col.Type) == 0 {
			k = 3
		}
		if err := decodeColumn(col, m.nodes[ci].nulls, bufs[bi:bi+k], k == 3 && fresh[bi+2], n, slab[ci:], nc); err != nil {
			return dst[:start], fmt.Errorf("%w: column %q: %v", ErrCorrupt, col.Name, err)
		}
		bi += k
	}
	for _, v := range [][]byte{bufs[bi], bufs[bi+2]} {
		if len(v) > 0 && bitutil.CountSetBits(v, 0, n) != n {
			return dst[:start], fmt.Errorf("%w: null in column %s or %s", ErrCorrupt, colTime, colDiff)
		}
	}
	ts, ds := bufs[bi+1], bufs[bi+3] // after each one's validity
	for j := range us {
		us[j].T = binary.LittleEndian.Uint64(ts[8*j:])
		us[j].Diff = int64(binary.LittleEndian.Uint64(ds[8*j:]))
	}

	if !consolidated(cols, m, bufs, us) {
		return dst[:start], fmt.Errorf("%w: updates are not sorted and consolidated", ErrCorrupt)
	}
	if i > 0 && row.CompareUpdate(r.last, us[0]) >= 0 {
		return dst[:start], fmt.Errorf("%w: first update does not follow the previous batch", ErrCorrupt)
	}
	r.last = CloneUpdate(us[n-1])
	return dst, nil
}

// consolidated reports whether a batch's updates are sorted by (row, time)
// with no duplicate pair and no zero diff (row.IsConsolidated). When the
// first column holds no NULL and strictly increasing integers, the rows
// are distinct and in order whatever the other columns hold, so only the
// diffs are checked: one integer comparison per update instead of a
// comparison of rows.
func consolidated(cols []row.Column, m *batchMeta, bufs [][]byte, us []row.Update) bool {
	if len(cols) == 0 || m.nodes[0].nulls != 0 || !increasing(cols[0].Type, bufs[1], len(us)) {
		return row.IsConsolidated(us)
	}
	for _, u := range us {
		if u.Diff == 0 {
			return false
		}
	}
	return true
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

// validity is a column's null bitmap; nil when the column has no nulls.
type validity []byte

func (v validity) null(i int) bool { return v != nil && v[i>>3]&(1<<(i&7)) == 0 }

// decodeColumn decodes the n values of one column from its buffers
// (validity, values or offsets, data) into out[j*stride] for row j, leaving
// NULLs nil. checkBatchLayout has checked the buffer sizes; the bitmap is
// checked against the null count here.
func decodeColumn(col row.Column, nulls int64, bufs [][]byte, fresh bool, n int, out []row.Datum, stride int) error {
	var valid validity
	if len(bufs[0]) > 0 {
		// Present even with a null count of 0 (our writer omits it then):
		// check it, or a corrupted count would turn NULLs into zeros.
		if got := n - bitutil.CountSetBits(bufs[0], 0, n); int64(got) != nulls {
			return fmt.Errorf("validity bitmap has %d nulls, header says %d", got, nulls)
		}
		if nulls > 0 {
			valid = bufs[0]
		}
	}
	vals := bufs[1]
	if fixedWidth(col.Type) == 0 {
		return decodeVarColumn(col.Type, valid, vals, bufs[2], fresh, n, out, stride)
	}

	le := binary.LittleEndian
	switch col.Type {
	case row.TypeBool:
		// bool boxes without allocating.
		for j := range n {
			if !valid.null(j) {
				out[j*stride] = bitutil.BitIsSet(vals, j)
			}
		}
	case row.TypeInt2:
		s := newSlab[int16](n)
		for j := range n {
			if !valid.null(j) {
				out[j*stride] = s.box(j, int16(le.Uint16(vals[2*j:])))
			}
		}
	case row.TypeInt4:
		s := newSlab[int32](n)
		for j := range n {
			if !valid.null(j) {
				out[j*stride] = s.box(j, int32(le.Uint32(vals[4*j:])))
			}
		}
	case row.TypeInt8:
		s := newSlab[int64](n)
		for j := range n {
			if !valid.null(j) {
				out[j*stride] = s.box(j, int64(le.Uint64(vals[8*j:])))
			}
		}
	case row.TypeFloat4:
		s := newSlab[float32](n)
		for j := range n {
			if !valid.null(j) {
				out[j*stride] = s.box(j, math.Float32frombits(le.Uint32(vals[4*j:])))
			}
		}
	case row.TypeFloat8:
		s := newSlab[float64](n)
		for j := range n {
			if !valid.null(j) {
				out[j*stride] = s.box(j, math.Float64frombits(le.Uint64(vals[8*j:])))
			}
		}
	case row.TypeTimestamp:
		s := newSlab[row.Timestamp](n)
		for j := range n {
			if !valid.null(j) {
				out[j*stride] = s.box(j, row.Timestamp(le.Uint64(vals[8*j:])))
			}
		}
	case row.TypeTimestampTZ:
		s := newSlab[row.TimestampTZ](n)
		for j := range n {
			if !valid.null(j) {
				out[j*stride] = s.box(j, row.TimestampTZ(le.Uint64(vals[8*j:])))
			}
		}
	case row.TypeDate:
		s := newSlab[row.Date](n)
		for j := range n {
			if !valid.null(j) {
				out[j*stride] = s.box(j, row.Date(le.Uint32(vals[4*j:])))
			}
		}
	case row.TypeUUID:
		s := newSlab[row.UUID](n)
		for j := range n {
			if !valid.null(j) {
				out[j*stride] = s.box(j, row.UUID(vals[16*j:16*j+16]))
			}
		}
	default:
		return fmt.Errorf("unexpected fixed-width type %v", col.Type)
	}
	return nil
}

// decodeVarColumn decodes a text, numeric, jsonb or bytea column. The
// values' bytes are copied once into one string (or []byte) per column and
// batch, and each value is a slice of it; when data is fresh (memory of its
// own that nothing else writes, see PartReader.buffers) a text column's
// string is data itself, not a copy.
func decodeVarColumn(t row.Type, valid validity, offBuf, data []byte, fresh bool, n int, out []row.Datum, stride int) error {
	if len(offBuf) < 4*(n+1) {
		return fmt.Errorf("offsets buffer of %d bytes, want %d", len(offBuf), 4*(n+1))
	}
	le := binary.LittleEndian
	off := func(j int) int { return int(int32(le.Uint32(offBuf[4*j:]))) }
	first, last := off(0), off(n)
	if first < 0 || last > len(data) || first > last {
		return fmt.Errorf("offsets [%d, %d] outside data of %d bytes", first, last, len(data))
	}
	region := data[first:last]
	prev := first
	for j := 1; j <= n; j++ {
		o := off(j)
		if o < prev {
			return fmt.Errorf("offset %d of %d decreases", j, o)
		}
		prev = o
	}

	if t == row.TypeBytea {
		buf := make([]byte, len(region))
		copy(buf, region)
		s := newSlab[[]byte](n)
		for j := range n {
			if !valid.null(j) {
				a, b := off(j)-first, off(j+1)-first
				out[j*stride] = s.box(j, buf[a:b:b])
			}
		}
		return nil
	}

	// Valid UTF-8 as a whole, and every value boundary on a rune start:
	// then each value is valid UTF-8 on its own.
	if !utf8.Valid(region) {
		return errors.New("text is not valid UTF-8")
	}
	for j := 0; j < n; j++ {
		if o := off(j) - first; o < len(region) && !utf8.RuneStart(region[o]) {
			return fmt.Errorf("value %d starts inside a UTF-8 sequence", j)
		}
	}
	var all string
	if fresh && len(region) > 0 {
		// Nothing writes data again: the batch's buffers are not reused
		// for a buffer buffers returned as fresh.
		all = unsafe.String(unsafe.SliceData(region), len(region))
	} else {
		all = string(region)
	}
	value := func(j int) string { return all[off(j)-first : off(j+1)-first] }
	switch t {
	case row.TypeNumeric:
		s := newSlab[row.Numeric](n)
		for j := range n {
			if !valid.null(j) {
				v := value(j)
				if !canonicalNumeric(v) {
					return fmt.Errorf("value %d: numeric %.40q is not canonical", j, v)
				}
				out[j*stride] = s.box(j, row.Numeric(v))
			}
		}
	case row.TypeJSONB:
		s := newSlab[row.JSON](n)
		for j := range n {
			if !valid.null(j) {
				v := value(j)
				if err := checkTextValue(t, v); err != nil {
					return fmt.Errorf("value %d: %v", j, err)
				}
				out[j*stride] = s.box(j, row.JSON(v))
			}
		}
	default:
		s := newSlab[string](n)
		for j := range n {
			if !valid.null(j) {
				out[j*stride] = s.box(j, value(j))
			}
		}
	}
	return nil
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
