// Package codec encodes and decodes parts: the immutable blobs in which
// persist stores runs of updates. A part is one consolidated run of
// (row, t, diff) updates of one shard's schema.
//
// # Format
//
// A part is an Arrow IPC *file* (arrowwrite.go writes it; any Arrow
// implementation can read it):
//
//	"ARROW1\0\0"  schema message  record batch 0 ... record batch k-1  footer  footer length  "ARROW1"
//
// The file format rather than the stream format because its footer lists
// every record batch's offset and size: a reader validates all batch
// headers up front, knows the row count before decoding anything, can
// address batch i directly, and detects truncation from the missing
// trailing magic. (A stream cut at a batch boundary reads as a valid,
// shorter stream.)
//
// Columns, in order: one per schema column, then t (uint64, the update
// time in epoch milliseconds) and d (int64, the diff), neither nullable.
// Decoding is positional, so a user column may also be named "t" or "d".
// Schema columns are nullable exactly as the schema says, and map to Arrow
// types as follows:
//
//	SQL type     Arrow type                  shardtail.type  Go datum
//	bool         Bool                        bool            bool
//	int2         Int16                       int2            int16
//	int4         Int32                       int4            int32
//	int8         Int64                       int8            int64
//	float4       Float32                     float4          float32
//	float8       Float64                     float8          float64
//	numeric      Utf8, canonical text        numeric         row.Numeric
//	text         Utf8                        text            string
//	bytea        Binary                      bytea           []byte
//	timestamp    Timestamp(µs)               timestamp       row.Timestamp
//	timestamptz  Timestamp(µs, "UTC")        timestamptz     row.TimestampTZ
//	date         Date32                      date            row.Date
//	jsonb        Utf8, canonical JSON        jsonb           row.JSON
//	uuid         FixedSizeBinary(16)         uuid            row.UUID
//
// Metadata: every schema column's Arrow field carries "shardtail.type" (the
// token above), which tells apart SQL types that share an Arrow type; names
// and nullability are the Arrow field's own. The Arrow schema carries
// "shardtail.format" (FormatVersion) and "shardtail.rows" (the total row
// count). Together they describe the shardtail schema completely, so a
// reader verifies that a part matches the schema it expects.
//
// Record batches: updates are cut into batches of at most Config.BatchRows
// rows (default 8192) and about Config.BatchBytes of decoded size (default
// 4 MiB), so that a reader holds one batch at a time. Every batch has at
// least one row; an empty part (0 updates) has no batches and is valid.
// Rows are sorted by (row, t) and consolidated across the whole part
// (row.IsConsolidated), not only within a batch.
//
// Compression: every non-empty buffer is zstd-compressed with Arrow's body
// compression (codec ZSTD, method BUFFER: the uncompressed length, then a
// frame; klauspost/compress), with zstd's content checksum, so flipped bits
// in a buffer are detected. A buffer is compressed even where the frame is
// larger than its bytes: Arrow's uncompressed form (length -1) has no
// checksum.
//
// # Versioning
//
// "shardtail.format" is "1". Any change to columns, types, metadata or batch
// rules bumps it; a reader rejects other versions with ErrUnsupportedVersion
// rather than guessing. Type tokens are never reused.
//
// # Validation
//
// Parts come from blob storage, so decoding trusts nothing: a corrupt or
// truncated part yields an error, never a panic or an unbounded allocation.
// The reader parses the Arrow footer and record batch headers itself with
// bounds checks on every flatbuffer offset (see arrowfile.go for why not
// arrow-go's reader), admits only the layout above, and charges each batch's
// decompressed buffers and Go rows against Config.MaxBatchDecodedBytes
// before allocating anything; zstd never writes past the size it was given.
// It then checks: framing and footer; format version; schema (column count,
// names, Arrow types, shardtail.type, nullability); the row count; per
// batch, the field nodes, buffer counts and sizes, null counts against the
// bitmaps, no NULL where the schema forbids it, monotonic offsets inside the
// data; valid UTF-8 text, canonical numeric, valid JSON; and that the
// updates are sorted and consolidated across batches, with no zero diff.
// A recover turns any missed case into ErrCorrupt as a last resort.
// Encoding applies the same value rules to its input, so it never writes a
// part the reader would reject.
//
// # Memory
//
// Decoded updates never alias the part's bytes. Each batch decodes into
// slabs: one []row.Datum for all its rows, one typed slice per column
// (datums point into it instead of each being a separate allocation; see
// box.go), and one string or []byte holding all of a variable-width
// column's values. Holding any row of a batch keeps that batch's slabs
// alive.
//
// # Use
//
// The snapshot cursor streams a part one batch at a time:
//
//	data, stats, err := codec.EncodePart(schema, updates) // updates consolidated
//	// ... upload data; record stats in State ...
//
//	r, err := codec.NewPartReader(schema, data)
//	if err != nil {
//		return err // ErrCorrupt, ErrSchemaMismatch, ErrUnsupportedVersion, ErrTooLarge
//	}
//	defer r.Close()
//	for {
//		batch, err := r.Next()
//		if err == io.EOF {
//			break
//		}
//		if err != nil {
//			return err
//		}
//		// ... merge batch ...
//	}
//
// DecodePart decodes a whole part at once.
package codec
