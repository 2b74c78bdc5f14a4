package codec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
)

// This file reads the subset of the Arrow IPC file format that parts use:
// the framing, the footer (schema and record batch blocks) and each record
// batch message. Both are flatbuffers, and flatbuffers carry untrusted
// offsets and lengths, so every table, vector and string is bounds-checked
// before it is read, and only the layouts our writer produces are admitted.
//
// Why not arrow-go's ipc.FileReader: it trusts flatbuffer vector lengths (a
// footer claiming 2^32 fields makes it call make([]arrow.Field, 2^32), which
// kills the process where recover cannot help), it allocates a compressed
// buffer's claimed size before decompressing, and it creates a new zstd
// stream decoder per record batch, each with an ~8 MiB history ring: about
// 1 GB of garbage per million rows decoded. Writing is ours too (see
// arrowwrite.go), and parts remain standard Arrow IPC files:
// TestArrowReaderAgrees checks that arrow-go reads them as we do.

// Arrow flatbuffer enum values (format/Schema.fbs, Message.fbs).
const (
	fbMetadataV5        = 4
	fbHeaderSchema      = 1
	fbHeaderRecordBatch = 3
	fbCompressionZSTD   = 1

	fbTypeInt             = 2
	fbTypeFloatingPoint   = 3
	fbTypeBinary          = 4
	fbTypeUtf8            = 5
	fbTypeBool            = 6
	fbTypeDate            = 8
	fbTypeTimestamp       = 10
	fbTypeFixedSizeBinary = 15
)

var arrowMagic = []byte("ARROW1")

// fbTable is a bounds-checked flatbuffer table: its vtable and inline
// object lie inside b.
type fbTable struct {
	b      []byte
	pos    int
	vt     int
	vtLen  int
	objLen int
}

func fbErr(format string, args ...any) error {
	return fmt.Errorf("%w: arrow metadata: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

func u16(b []byte, p int) int { return int(binary.LittleEndian.Uint16(b[p:])) }
func u32(b []byte, p int) int { return int(binary.LittleEndian.Uint32(b[p:])) }

// fbRoot returns the root table of flatbuffer b.
func fbRoot(b []byte) (fbTable, error) {
	if len(b) < 4 {
		return fbTable{}, fbErr("flatbuffer of %d bytes", len(b))
	}
	return fbTableAt(b, u32(b, 0))
}

func fbTableAt(b []byte, pos int) (fbTable, error) {
	if pos < 0 || pos > len(b)-4 {
		return fbTable{}, fbErr("table at %d outside %d bytes", pos, len(b))
	}
	vt := pos - int(int32(binary.LittleEndian.Uint32(b[pos:])))
	if vt < 0 || vt > len(b)-4 {
		return fbTable{}, fbErr("vtable at %d outside %d bytes", vt, len(b))
	}
	t := fbTable{b: b, pos: pos, vt: vt, vtLen: u16(b, vt), objLen: u16(b, vt+2)}
	if t.vtLen < 4 || t.vtLen%2 != 0 || vt+t.vtLen > len(b) {
		return fbTable{}, fbErr("vtable length %d at %d", t.vtLen, vt)
	}
	if t.objLen < 4 || pos+t.objLen > len(b) {
		return fbTable{}, fbErr("table length %d at %d", t.objLen, pos)
	}
	return t, nil
}

// field returns the offset of slot's value inside the table object, or 0 if
// the slot is absent (flatbuffers' Table.Offset).
func (t fbTable) field(slot int) int {
	off := 4 + 2*slot
	if off >= t.vtLen {
		return 0
	}
	return u16(t.b, t.vt+off)
}

// scalar returns the position of slot's size-byte scalar, or -1 if absent.
func (t fbTable) scalar(slot, size int) (int, error) {
	o := t.field(slot)
	if o == 0 {
		return -1, nil
	}
	if o+size > t.objLen {
		return 0, fbErr("slot %d of %d bytes at %d past table end %d", slot, size, o, t.objLen)
	}
	return t.pos + o, nil
}

func (t fbTable) int64(slot int, def int64) (int64, error) {
	p, err := t.scalar(slot, 8)
	if p < 0 || err != nil {
		return def, err
	}
	return int64(binary.LittleEndian.Uint64(t.b[p:])), nil
}

func (t fbTable) int32(slot int, def int32) (int32, error) {
	p, err := t.scalar(slot, 4)
	if p < 0 || err != nil {
		return def, err
	}
	return int32(binary.LittleEndian.Uint32(t.b[p:])), nil
}

func (t fbTable) int16(slot int, def int16) (int16, error) {
	p, err := t.scalar(slot, 2)
	if p < 0 || err != nil {
		return def, err
	}
	return int16(binary.LittleEndian.Uint16(t.b[p:])), nil
}

func (t fbTable) uint8(slot int, def uint8) (uint8, error) {
	p, err := t.scalar(slot, 1)
	if p < 0 || err != nil {
		return def, err
	}
	return t.b[p], nil
}

// ref follows slot's uoffset and returns the absolute target, or -1 if the
// slot is absent. The target has at least 4 readable bytes.
func (t fbTable) ref(slot int) (int, error) {
	p, err := t.scalar(slot, 4)
	if p < 0 || err != nil {
		return -1, err
	}
	target := p + u32(t.b, p)
	if target > len(t.b)-4 {
		return 0, fbErr("slot %d points to %d outside %d bytes", slot, target, len(t.b))
	}
	return target, nil
}

// table returns slot's subtable; ok is false if the slot is absent.
func (t fbTable) table(slot int) (sub fbTable, ok bool, err error) {
	p, err := t.ref(slot)
	if p < 0 || err != nil {
		return fbTable{}, false, err
	}
	sub, err = fbTableAt(t.b, p)
	return sub, err == nil, err
}

// vector returns the start and length of slot's vector of elem-byte
// elements (0, 0 if absent), checking that all of it lies inside the buffer.
func (t fbTable) vector(slot, elem int) (start, n int, err error) {
	p, err := t.ref(slot)
	if p < 0 || err != nil {
		return 0, 0, err
	}
	n = u32(t.b, p)
	start = p + 4
	if int64(n)*int64(elem) > int64(len(t.b)-start) {
		return 0, 0, fbErr("vector of %d x %d bytes at %d outside %d bytes", n, elem, start, len(t.b))
	}
	return start, n, nil
}

// str returns slot's string bytes (nil if absent).
func (t fbTable) str(slot int) ([]byte, error) {
	start, n, err := t.vector(slot, 1)
	if err != nil || n == 0 {
		return nil, err
	}
	return t.b[start : start+n], nil
}

// tables calls fn on each table of slot's vector of tables.
func (t fbTable) tables(slot int, fn func(i int, sub fbTable) error) error {
	start, n, err := t.vector(slot, 4)
	if err != nil {
		return err
	}
	for i := range n {
		p := start + 4*i
		sub, err := fbTableAt(t.b, p+u32(t.b, p))
		if err != nil {
			return err
		}
		if err := fn(i, sub); err != nil {
			return err
		}
	}
	return nil
}

// keyValues reads a [KeyValue] slot (custom_metadata).
func (t fbTable) keyValues(slot int) ([]keyValue, error) {
	var kvs []keyValue
	err := t.tables(slot, func(_ int, kv fbTable) error {
		k, err := kv.str(0)
		if err != nil {
			return err
		}
		v, err := kv.str(1)
		kvs = append(kvs, keyValue{string(k), string(v)})
		return err
	})
	return kvs, err
}

// fileBlock locates one record batch message: metadata then body.
type fileBlock struct {
	offset int64
	meta   int32
	body   int64
}

// keyValue is one custom metadata entry.
type keyValue struct{ key, value string }

// typeInfo is an Arrow type as the flatbuffer spells it: the Type union id
// and the parameters of the types parts use.
type typeInfo struct {
	id        uint8
	bitWidth  int32  // Int
	signed    bool   // Int
	precision int16  // FloatingPoint: 1 single, 2 double
	unit      int16  // Date: 0 day; Timestamp: 2 microsecond
	timezone  string // Timestamp
	byteWidth int32  // FixedSizeBinary
}

// fieldInfo is one field of a part's Arrow schema.
type fieldInfo struct {
	name     string
	nullable bool
	typ      typeInfo
	meta     []keyValue
}

// fileInfo is what the footer of a part says.
type fileInfo struct {
	fields []fieldInfo
	meta   []keyValue
	blocks []fileBlock
}

// readFooter checks the framing and footer of an Arrow IPC file and returns
// its schema and record batch blocks.
func readFooter(data []byte) (fileInfo, error) {
	const trailer = 4 + 6 // footer length + "ARROW1"
	if len(data) < 8+trailer || !bytes.Equal(data[:6], arrowMagic) || data[6] != 0 || data[7] != 0 ||
		!bytes.Equal(data[len(data)-6:], arrowMagic) {
		return fileInfo{}, fmt.Errorf("%w: not an Arrow IPC file (%d bytes)", ErrCorrupt, len(data))
	}
	size := u32(data, len(data)-trailer)
	footerStart := len(data) - trailer - size
	if size <= 0 || footerStart < 8 {
		return fileInfo{}, fmt.Errorf("%w: footer length %d in %d bytes", ErrCorrupt, size, len(data))
	}
	ft, err := fbRoot(data[footerStart : len(data)-trailer])
	if err != nil {
		return fileInfo{}, err
	}
	if v, err := ft.int16(0, 0); err != nil || v != fbMetadataV5 {
		return fileInfo{}, fbErr("footer version %d (err %v)", v, err)
	}
	st, ok, err := ft.table(1)
	if err != nil || !ok {
		return fileInfo{}, fbErr("footer has no schema (err %v)", err)
	}
	var fi fileInfo
	if fi.fields, fi.meta, err = readSchema(st); err != nil {
		return fileInfo{}, err
	}
	if _, n, err := ft.vector(2, 24); err != nil || n != 0 {
		return fileInfo{}, fbErr("%d dictionaries (err %v)", n, err)
	}
	if _, err := ft.keyValues(4); err != nil {
		return fileInfo{}, err
	}
	// The file repeats the schema in a leading stream message; check it
	// too, so that a reader of the stream portion sees the same part.
	end, err := checkLeadingSchema(data[:footerStart], fi)
	if err != nil {
		return fileInfo{}, err
	}
	start, n, err := ft.vector(3, 24)
	if err != nil {
		return fileInfo{}, err
	}
	// Batches follow the schema message back to back, then the 8-byte
	// end-of-stream marker, then the footer: no byte is unaccounted for.
	fi.blocks = make([]fileBlock, n)
	for i := range fi.blocks {
		p := start + 24*i
		b := fileBlock{
			offset: int64(binary.LittleEndian.Uint64(ft.b[p:])),
			meta:   int32(binary.LittleEndian.Uint32(ft.b[p+8:])),
			body:   int64(binary.LittleEndian.Uint64(ft.b[p+16:])),
		}
		if b.offset != end || b.meta < 16 || b.body < 0 || b.meta%8 != 0 || b.body%8 != 0 ||
			int64(b.meta) > int64(footerStart)-b.offset ||
			b.body > int64(footerStart)-b.offset-int64(b.meta) {
			return fileInfo{}, fbErr("record batch block %d %+v not at %d or past %d", i, b, end, footerStart)
		}
		end = b.offset + int64(b.meta) + b.body
		fi.blocks[i] = b
	}
	if end != int64(footerStart)-8 || !bytes.Equal(data[end:footerStart], endOfStream) {
		return fileInfo{}, fbErr("no end-of-stream marker between the last batch (%d) and the footer (%d)", end, footerStart)
	}
	return fi, nil
}

var endOfStream = []byte{0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0}

// checkLeadingSchema checks that the schema message after the leading magic
// repeats the footer's schema, and returns where it ends.
func checkLeadingSchema(data []byte, fi fileInfo) (int64, error) {
	if len(data) < 16 || binary.LittleEndian.Uint32(data[8:]) != 0xFFFFFFFF {
		return 0, fbErr("no schema message after the magic")
	}
	size := u32(data, 12)
	if size%8 != 0 || size > len(data)-16 {
		return 0, fbErr("schema message of %d bytes", size)
	}
	mt, err := fbRoot(data[16 : 16+size])
	if err != nil {
		return 0, err
	}
	if v, err := mt.int16(0, 0); err != nil || v != fbMetadataV5 {
		return 0, fbErr("schema message version %d (err %v)", v, err)
	}
	if h, err := mt.uint8(1, 0); err != nil || h != fbHeaderSchema {
		return 0, fbErr("first message type %d, want schema (err %v)", h, err)
	}
	if bl, err := mt.int64(3, 0); err != nil || bl != 0 {
		return 0, fbErr("schema message body length %d (err %v)", bl, err)
	}
	if _, n, err := mt.vector(4, 4); err != nil || n != 0 {
		return 0, fbErr("schema message has %d custom metadata entries (err %v)", n, err)
	}
	st, ok, err := mt.table(2)
	if err != nil || !ok {
		return 0, fbErr("schema message has no schema (err %v)", err)
	}
	fields, meta, err := readSchema(st)
	if err != nil {
		return 0, err
	}
	if !slices.EqualFunc(fields, fi.fields, func(a, b fieldInfo) bool {
		return a.name == b.name && a.nullable == b.nullable && a.typ == b.typ && slices.Equal(a.meta, b.meta)
	}) || !slices.Equal(meta, fi.meta) {
		return 0, fbErr("schema message differs from the footer's schema")
	}
	return int64(16 + size), nil
}

// readSchema reads a Schema table. It admits only flat, little-endian
// fields of the Arrow types parts use, without dictionaries.
func readSchema(st fbTable) ([]fieldInfo, []keyValue, error) {
	if e, err := st.int16(0, 0); err != nil || e != 0 {
		return nil, nil, fbErr("schema endianness %d (err %v)", e, err)
	}
	meta, err := st.keyValues(2)
	if err != nil {
		return nil, nil, err
	}
	var fields []fieldInfo
	err = st.tables(1, func(i int, f fbTable) error {
		var fi fieldInfo
		name, err := f.str(0)
		if err != nil {
			return err
		}
		fi.name = string(name)
		nullable, err := f.uint8(1, 0)
		if err != nil {
			return err
		}
		fi.nullable = nullable != 0
		if fi.meta, err = f.keyValues(6); err != nil {
			return err
		}
		if f.field(4) != 0 {
			return fmt.Errorf("%w: field %d is dictionary-encoded", ErrSchemaMismatch, i)
		}
		if _, n, err := f.vector(5, 4); err != nil || n != 0 {
			return fmt.Errorf("%w: field %d has %d children (err %v)", ErrSchemaMismatch, i, n, err)
		}
		if fi.typ.id, err = f.uint8(2, 0); err != nil {
			return err
		}
		typ, ok, err := f.table(3)
		if err != nil || !ok {
			return fbErr("field %d has no type table (err %v)", i, err)
		}
		if err := readType(typ, &fi.typ); err != nil {
			return fmt.Errorf("field %d: %w", i, err)
		}
		fields = append(fields, fi)
		return nil
	})
	return fields, meta, err
}

// readType reads the parameters of a Type union table, using the
// flatbuffer schema's defaults for absent slots.
func readType(t fbTable, ti *typeInfo) error {
	var err error
	switch ti.id {
	case fbTypeBinary, fbTypeUtf8, fbTypeBool:
	case fbTypeInt:
		if ti.bitWidth, err = t.int32(0, 0); err != nil {
			return err
		}
		var signed uint8
		signed, err = t.uint8(1, 0)
		ti.signed = signed != 0
	case fbTypeFloatingPoint:
		ti.precision, err = t.int16(0, 0)
	case fbTypeDate:
		ti.unit, err = t.int16(0, 1) // default MILLISECOND
	case fbTypeTimestamp:
		if ti.unit, err = t.int16(0, 0); err != nil {
			return err
		}
		var tz []byte
		tz, err = t.str(1)
		ti.timezone = string(tz)
	case fbTypeFixedSizeBinary:
		ti.byteWidth, err = t.int32(0, 0)
	default:
		return fmt.Errorf("%w: arrow type id %d", ErrSchemaMismatch, ti.id)
	}
	return err
}

// batchMeta is the checked content of one record batch message.
type batchMeta struct {
	length     int64
	nodes      []fieldNode
	buffers    []bufferDesc
	compressed bool
}

type fieldNode struct{ length, nulls int64 }

type bufferDesc struct{ offset, length int64 }

// readBatchMessage checks block blk's message metadata and returns it.
func readBatchMessage(data []byte, blk fileBlock) (batchMeta, error) {
	meta := data[blk.offset : blk.offset+int64(blk.meta)]
	// The encapsulated message: 0xFFFFFFFF, int32 length, flatbuffer.
	if binary.LittleEndian.Uint32(meta) != 0xFFFFFFFF || int64(u32(meta, 4)) != int64(blk.meta)-8 {
		return batchMeta{}, fbErr("bad message prefix at %d", blk.offset)
	}
	mt, err := fbRoot(meta[8:])
	if err != nil {
		return batchMeta{}, err
	}
	if v, err := mt.int16(0, 0); err != nil || v != fbMetadataV5 {
		return batchMeta{}, fbErr("message version %d (err %v)", v, err)
	}
	if h, err := mt.uint8(1, 0); err != nil || h != fbHeaderRecordBatch {
		return batchMeta{}, fbErr("message type %d, want record batch (err %v)", h, err)
	}
	if bl, err := mt.int64(3, 0); err != nil || bl != blk.body {
		return batchMeta{}, fbErr("message body length %d, block says %d (err %v)", bl, blk.body, err)
	}
	if _, n, err := mt.vector(4, 4); err != nil || n != 0 {
		return batchMeta{}, fbErr("message has %d custom metadata entries (err %v)", n, err)
	}
	rb, ok, err := mt.table(2)
	if err != nil || !ok {
		return batchMeta{}, fbErr("message has no record batch header (err %v)", err)
	}
	var m batchMeta
	if m.length, err = rb.int64(0, 0); err != nil {
		return batchMeta{}, err
	}
	if _, n, err := rb.vector(4, 8); err != nil || n != 0 {
		return batchMeta{}, fbErr("%d variadic buffer counts (err %v)", n, err)
	}
	if ct, ok, err := rb.table(3); err != nil {
		return batchMeta{}, err
	} else if ok {
		codec, err := ct.uint8(0, 0)
		if err != nil {
			return batchMeta{}, err
		}
		method, err := ct.uint8(1, 0)
		if err != nil {
			return batchMeta{}, err
		}
		if codec != fbCompressionZSTD || method != 0 {
			return batchMeta{}, fbErr("compression codec %d method %d, want zstd buffer", codec, method)
		}
		m.compressed = true
	}
	start, n, err := rb.vector(1, 16)
	if err != nil {
		return batchMeta{}, err
	}
	m.nodes = make([]fieldNode, n)
	for i := range m.nodes {
		p := start + 16*i
		m.nodes[i] = fieldNode{
			length: int64(binary.LittleEndian.Uint64(rb.b[p:])),
			nulls:  int64(binary.LittleEndian.Uint64(rb.b[p+8:])),
		}
	}
	start, n, err = rb.vector(2, 16)
	if err != nil {
		return batchMeta{}, err
	}
	m.buffers = make([]bufferDesc, n)
	for i := range m.buffers {
		p := start + 16*i
		b := bufferDesc{
			offset: int64(binary.LittleEndian.Uint64(rb.b[p:])),
			length: int64(binary.LittleEndian.Uint64(rb.b[p+8:])),
		}
		if b.offset < 0 || b.length < 0 || b.offset > blk.body || b.length > blk.body-b.offset {
			return batchMeta{}, fbErr("buffer %d [%d, +%d) outside body of %d bytes", i, b.offset, b.length, blk.body)
		}
		m.buffers[i] = b
	}
	return m, nil
}
