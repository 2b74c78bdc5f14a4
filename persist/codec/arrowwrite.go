package codec

import (
	"encoding/binary"
	"fmt"
	"sync"

	flatbuffers "github.com/google/flatbuffers/go"
	"github.com/klauspost/compress/zstd"

	"github.com/shardtail/shardtail/row"
)

// This file writes parts as Arrow IPC files: the layout arrowfile.go
// reads (see doc.go), standard Arrow that any Arrow reader opens
// (TestArrowReaderAgrees reads it with arrow-go).
//
// Why not arrow-go's ipc.FileWriter, which wrote parts before: it makes a
// new zstd stream encoder for every file, and a zstd encoder allocates
// its match tables (about 1.3 MB) on first use. A 10-row INSERT's part
// then cost 1.3 MB of garbage, most of what a write allocated, and the
// collector's time with it. Here every part compresses through one shared
// encoder's EncodeAll, which reuses its tables.

// zstdEncoder compresses the buffers of every part. EncodeAll is safe for
// concurrent use; it keeps an encoder (and its tables) per concurrent
// call, up to GOMAXPROCS, and reuses them. A 1 MiB window rather than the
// default 8 MiB: each encoder keeps a history of window and a block once
// it has compressed a large buffer (a compaction's), for the life of the
// process, and parts compress no worse (BenchmarkEncodePart's bytes per
// row are the same).
var zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(true), zstd.WithWindowSize(1<<20))
	if err != nil {
		panic(fmt.Sprintf("codec: zstd encoder options: %v", err)) // static options
	}
	return e
})

// ipcAlignment is the alignment of messages and body buffers in the file.
const ipcAlignment = 8

func align8(n int) int { return (n + ipcAlignment - 1) &^ (ipcAlignment - 1) }

// padding is zeros to align with.
var padding [ipcAlignment]byte

// partWriter writes one part: the leading magic and schema message, a
// record batch message per batch, then the end-of-stream marker and the
// footer.
type partWriter struct {
	schema row.Schema
	rows   int // the part's total, in the schema's metadata
	out    chunkWriter
	pos    int64 // bytes written to out
	blocks []fileBlock
	fb     *flatbuffers.Builder
	// body is a record batch's body being assembled, reused from batch
	// to batch.
	body []byte
	// bufs are the batch's buffers' (offset, length) in body.
	bufs []bufferDesc
}

func newPartWriter(schema row.Schema, rows int) *partWriter {
	w := &partWriter{schema: schema, rows: rows, fb: flatbuffers.NewBuilder(1024)}
	w.put(arrowMagic, padding[:2])
	w.fb.Reset()
	w.fb.Finish(w.message(fbHeaderSchema, w.schemaTable(), 0))
	w.appendMessage(w.fb.FinishedBytes())
	return w
}

// appendMessage appends an encapsulated message's prefix and metadata,
// padded so that its body starts aligned, and returns the metadata's
// length with the prefix (a block's metaDataLength).
func (w *partWriter) appendMessage(meta []byte) int32 {
	size := align8(len(meta))
	var prefix [8]byte
	binary.LittleEndian.PutUint32(prefix[:], 0xFFFFFFFF)
	binary.LittleEndian.PutUint32(prefix[4:], uint32(size))
	w.put(prefix[:], meta, padding[:size-len(meta)])
	return int32(8 + size)
}

// write appends one record batch of rows rows: a field node per field
// (its null count) and the fields' buffers in order (validity, then
// values, or offsets and data; an empty validity without nulls).
func (w *partWriter) write(rows int, nulls []int64, bufs [][]byte) {
	w.body, w.bufs = w.body[:0], w.bufs[:0]
	enc := zstdEncoder()
	for _, raw := range bufs {
		start := len(w.body)
		if len(raw) > 0 {
			// Arrow's buffer compression: the uncompressed length, then a
			// zstd frame. Always a frame, even where it is larger than
			// the bytes (Arrow's -1, stored as they are): its checksum is
			// what detects a flipped bit (doc.go).
			w.body = binary.LittleEndian.AppendUint64(w.body, uint64(len(raw)))
			w.body = enc.EncodeAll(raw, w.body)
		}
		w.bufs = append(w.bufs, bufferDesc{offset: int64(start), length: int64(len(w.body) - start)})
		w.body = append(w.body, padding[:align8(len(w.body))-len(w.body)]...)
	}

	b := w.fb
	b.Reset()
	compression := func() flatbuffers.UOffsetT {
		b.StartObject(2)
		b.PrependByteSlot(0, fbCompressionZSTD, 0) // method BUFFER is the default
		return b.EndObject()
	}()
	b.StartVector(16, len(w.bufs), 8)
	for i := len(w.bufs) - 1; i >= 0; i-- {
		b.Prep(8, 16)
		b.PrependInt64(w.bufs[i].length)
		b.PrependInt64(w.bufs[i].offset)
	}
	buffers := b.EndVector(len(w.bufs))
	b.StartVector(16, len(nulls), 8)
	for i := len(nulls) - 1; i >= 0; i-- {
		b.Prep(8, 16)
		b.PrependInt64(nulls[i])
		b.PrependInt64(int64(rows))
	}
	nodes := b.EndVector(len(nulls))
	b.StartObject(5)
	b.PrependInt64Slot(0, int64(rows), 0)
	b.PrependUOffsetTSlot(1, nodes, 0)
	b.PrependUOffsetTSlot(2, buffers, 0)
	b.PrependUOffsetTSlot(3, compression, 0)
	rb := b.EndObject()
	b.Finish(w.message(fbHeaderRecordBatch, rb, int64(len(w.body))))

	offset := w.pos
	meta := w.appendMessage(b.FinishedBytes())
	w.put(w.body)
	w.blocks = append(w.blocks, fileBlock{offset: offset, meta: meta, body: int64(len(w.body))})
}

// finish appends the end-of-stream marker and the footer, and returns the
// file.
func (w *partWriter) finish() []byte {
	w.put(endOfStream)
	b := w.fb
	b.Reset()
	schema := w.schemaTable()
	b.StartVector(24, len(w.blocks), 8)
	for i := len(w.blocks) - 1; i >= 0; i-- {
		blk := w.blocks[i]
		b.Prep(8, 24)
		b.PrependInt64(blk.body)
		b.Pad(4)
		b.PrependInt32(blk.meta)
		b.PrependInt64(blk.offset)
	}
	batches := b.EndVector(len(w.blocks))
	b.StartVector(24, 0, 8)
	dicts := b.EndVector(0)
	b.StartObject(5)
	b.PrependInt16Slot(0, fbMetadataV5, 0)
	b.PrependUOffsetTSlot(1, schema, 0)
	b.PrependUOffsetTSlot(2, dicts, 0)
	b.PrependUOffsetTSlot(3, batches, 0)
	b.Finish(b.EndObject())
	footer := b.FinishedBytes()
	w.put(footer, binary.LittleEndian.AppendUint32(nil, uint32(len(footer))), arrowMagic)
	return w.out.bytes()
}

// put appends bs to the file.
func (w *partWriter) put(bs ...[]byte) {
	for _, b := range bs {
		w.out.write(b)
		w.pos += int64(len(b))
	}
}

// chunkWriter collects the part in chunks and joins them once at the end:
// one growing slice would copy a large part about twice while growing.
type chunkWriter struct {
	chunks [][]byte
	n      int
}

func (w *chunkWriter) write(p []byte) {
	last := len(w.chunks) - 1
	if last < 0 || cap(w.chunks[last])-len(w.chunks[last]) < len(p) {
		size := min(max(64<<10, w.n), 4<<20) // grow with the part, up to 4 MiB
		if w.n < 64<<10 {
			size = 4 << 10 // most parts are a small write's
		}
		w.chunks = append(w.chunks, make([]byte, 0, max(size, len(p))))
		last++
	}
	w.chunks[last] = append(w.chunks[last], p...)
	w.n += len(p)
}

// bytes returns everything written, in one exactly sized slice.
func (w *chunkWriter) bytes() []byte {
	out := make([]byte, 0, w.n)
	for _, c := range w.chunks {
		out = append(out, c...)
	}
	return out
}

// message builds a Message table around header.
func (w *partWriter) message(kind uint8, header flatbuffers.UOffsetT, bodyLength int64) flatbuffers.UOffsetT {
	b := w.fb
	b.StartObject(5)
	b.PrependInt16Slot(0, fbMetadataV5, 0)
	b.PrependByteSlot(1, kind, 0)
	b.PrependUOffsetTSlot(2, header, 0)
	b.PrependInt64Slot(3, bodyLength, 0)
	return b.EndObject()
}

// schemaTable builds the part's Schema table: the schema's columns, each
// with its type token, then t and d; the format version and row count in
// the schema's metadata. Little-endian is the default.
func (w *partWriter) schemaTable() flatbuffers.UOffsetT {
	b := w.fb
	fields := make([]flatbuffers.UOffsetT, 0, len(w.schema.Columns)+2)
	for _, c := range w.schema.Columns {
		meta := w.keyValues(MetaType, typeTokens[c.Type])
		fields = append(fields, w.field(c.Name, c.Nullable, wireType(c.Type), meta))
	}
	fields = append(fields, w.field(colTime, false, wireTime, 0), w.field(colDiff, false, wireDiff, 0))
	meta := w.keyValues(MetaFormatVersion, FormatVersion, MetaRows, fmt.Sprint(w.rows))
	fv := w.offsets(fields)
	b.StartObject(4)
	b.PrependUOffsetTSlot(1, fv, 0)
	b.PrependUOffsetTSlot(2, meta, 0)
	return b.EndObject()
}

// field builds a Field table (meta 0: no custom metadata). Its children
// are an empty vector rather than absent: Arrow C++ rejects a field
// without one.
func (w *partWriter) field(name string, nullable bool, t typeInfo, meta flatbuffers.UOffsetT) flatbuffers.UOffsetT {
	b := w.fb
	n := b.CreateString(name)
	typ := w.typeTable(t)
	children := w.offsets(nil)
	b.StartObject(7)
	b.PrependUOffsetTSlot(0, n, 0)
	b.PrependBoolSlot(1, nullable, false)
	b.PrependByteSlot(2, t.id, 0)
	b.PrependUOffsetTSlot(3, typ, 0)
	b.PrependUOffsetTSlot(5, children, 0)
	if meta != 0 {
		b.PrependUOffsetTSlot(6, meta, 0)
	}
	return b.EndObject()
}

// typeTable builds the table of a Type union member, writing what differs
// from the flatbuffer schema's defaults (readType's).
func (w *partWriter) typeTable(t typeInfo) flatbuffers.UOffsetT {
	b := w.fb
	var tz flatbuffers.UOffsetT
	if t.timezone != "" {
		tz = b.CreateString(t.timezone)
	}
	switch t.id {
	case fbTypeInt:
		b.StartObject(2)
		b.PrependInt32Slot(0, t.bitWidth, 0)
		b.PrependBoolSlot(1, t.signed, false)
	case fbTypeFloatingPoint:
		b.StartObject(1)
		b.PrependInt16Slot(0, t.precision, 0)
	case fbTypeDate:
		b.StartObject(1)
		b.PrependInt16Slot(0, t.unit, 1)
	case fbTypeTimestamp:
		b.StartObject(2)
		b.PrependInt16Slot(0, t.unit, 0)
		if tz != 0 {
			b.PrependUOffsetTSlot(1, tz, 0)
		}
	case fbTypeFixedSizeBinary:
		b.StartObject(1)
		b.PrependInt32Slot(0, t.byteWidth, 0)
	default: // Binary, Utf8, Bool: no parameters
		b.StartObject(0)
	}
	return b.EndObject()
}

// keyValues builds a vector of KeyValue tables from key, value pairs.
func (w *partWriter) keyValues(kv ...string) flatbuffers.UOffsetT {
	b := w.fb
	tables := make([]flatbuffers.UOffsetT, 0, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		k, v := b.CreateString(kv[i]), b.CreateString(kv[i+1])
		b.StartObject(2)
		b.PrependUOffsetTSlot(0, k, 0)
		b.PrependUOffsetTSlot(1, v, 0)
		tables = append(tables, b.EndObject())
	}
	return w.offsets(tables)
}

// offsets builds a vector of the tables at offs.
func (w *partWriter) offsets(offs []flatbuffers.UOffsetT) flatbuffers.UOffsetT {
	b := w.fb
	b.StartVector(4, len(offs), 4)
	for i := len(offs) - 1; i >= 0; i-- {
		b.PrependUOffsetT(offs[i])
	}
	return b.EndVector(len(offs))
}
