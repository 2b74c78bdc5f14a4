// Package pgsink lands shardtail collections in PostgreSQL tables, exactly
// once.
//
// A Sink is both the consumer.Sink and the consumer.Checkpoint: Write opens
// a transaction on the target (locking the sink's row in
// shardtail_sink_checkpoints, so a second process with the same name waits
// and is then fenced before writing anything), and Commit stores the
// batch's frontier in that row and commits. Data and position move
// together, so a crash at any point leaves the target at a committed batch
// boundary and the next run resumes there: no update lost, none applied
// twice.
//
// Sources are subscribed with ENVELOPE UPSERT (KEY (…)) (Table.Envelope),
// so each update is the new state of a key. Per batch the updates are
// consolidated by key (the last state wins) and applied with one bulk
// upsert (COPY into a temporary table, INSERT … ON CONFLICT DO UPDATE) and
// one bulk delete. A snapshot — the first batch, or a new generation after a
// history loss — is loaded with COPY into a new table created with the
// source's column types and the key as primary key; the committing
// transaction drops the old table and renames the new one into place, so
// readers never see a half-loaded table. (Indexes, grants and constraints
// added to the old table by hand do not carry over.)
//
// A steady batch costs six round trips to the target: BEGIN with the lock
// on the checkpoint row, SAVEPOINT, COPY into the connection's staging
// table, the upsert (or delete) with the RELEASE, the checkpoint UPDATE and
// COMMIT. Its source-to-target latency is mostly the consumer's batch cut: a
// row waits up to consumer.Config.MaxBatchDelay (100 ms by default) before
// its batch is written. A small delay costs little throughput, because Run
// delivers one batch at a time and the rows that arrive while the sink
// writes make the next batch bigger.
//
// A row the target rejects (a constraint, a value it cannot store, a key
// violation in the source) is found by retrying the failed bulk statement
// row by row, each in a savepoint, and handled by Config.OnReject:
// DeadLetter stores it with the reason in shardtail_sink_dead_letters in
// the same transaction, Stall fails the batch, Skip logs it. Every rejected
// row is counted in pgsink_rejected_rows_total.
//
//	sink, err := pgsink.New(ctx, pgsink.Config{URL: target, Name: "orders", Tables: []pgsink.Table{{Name: "orders", Key: []string{"id"}}}})
//	…
//	err = consumer.Run(ctx, consumer.Config{URL: source, Sources: []consumer.Source{{Name: "orders", Envelope: table.Envelope()}}, Checkpoint: sink}, sink)
package pgsink
