// Package formatter is SUBSCRIBE's output, shared by the fast path and the
// dataflow path so that both produce exactly the same rows.
//
// Options describe one subscribe's output shape (PROGRESS, ENVELOPE UPSERT
// or DEBEZIUM with its KEY, WITHIN TIMESTAMP ORDER BY) and give its columns
// (Columns) and, for the consolidated updates at one time, its rows in order
// (Data). Batcher is the state machine around them: the progress row at AS
// OF, the snapshot, then each listen batch followed by its progress row,
// with UP TO completing the subscribe. Encoding rows to DataRow and CopyData
// bytes is in encode.go.
//
// A Row is (mz_timestamp, mz_progressed, tail): the tail (mz_diff or
// mz_state and the relation columns) does not depend on the timestamp, so
// its encoding can be shared between subscribers whose AS OF differs.
// Rows shared by many subscribers (Shared) are encoded once per wire
// format into one buffer; Runs hands them out as spans of it, which a COPY
// writes to its socket as they are. A reader alone on a group (WithSolo)
// encodes it with StreamRuns into a pooled buffer of its own (RunBuffer),
// released once written, rather than into the group's cache: what nobody
// else reads is not kept. A snapshot chunk's rows
// (SnapshotRows) go further: they refer to the chunk's updates instead of
// copying their columns into a tail of their own, and the encoders read
// the updates in place.
//
// Within one timestamp Materialize leaves the order unspecified; ours is
// deterministic: WITHIN TIMESTAMP ORDER BY items first (SQL order, NULLs
// placed as resolved by the planner), then the relation columns (row order),
// then mz_diff / mz_state.
//
// Ordering and the envelopes apply to a whole timestamp. Listen batches
// arrive whole; a snapshot arrives in chunks, and a shape whose order or
// key groups the chunks' row order does not serve is held back by the
// Batcher until the snapshot is complete, within max_result_size
// (snapshot.go). Plain output, an ORDER BY of the relation's leading
// columns, and an envelope keyed by them keep streaming.
package formatter
