// Package dataflow is SUBSCRIBE's other path: a private pipeline per
// subscribe. It serves what the fast path (package tail) does not — a query
// (SUBSCRIBE (SELECT ...)), a view, a query over no collection (VALUES) —
// and every SUBSCRIBE when enable_subscribe_persist_fast_path is off. It is
// the baseline of every comparison, so it is a competent implementation with
// no artificial delay: the fast path has to win by sharing work.
//
// # The pipeline
//
// StartSubscribe takes the contract's subscribe.Request plus what only this
// path needs (SubscribeConfig: the persist client, an MFP, a constant input)
// and starts one goroutine that:
//
//  1. registers a reader on the shard, whose since holds the subscribe's
//     history for as long as it runs, and moves AS OF to that since when the
//     request allows it (subscribe.Request.StartAt);
//  2. reads the snapshot at AS OF through a consolidating cursor. A bare
//     collection's chunks are final and stream; through an MFP rows of
//     different chunks may map to one row, so the snapshot is consolidated
//     whole first;
//  3. follows a listen from AS OF, applies the MFP to each batch,
//     consolidates it, and downgrades its reader as it passes times;
//  4. formats every step with a formatter.Batcher, as the fast path does,
//     and queues the rows for the client.
//
// The snapshot is read no more than a few MiB ahead of the client (it waits
// in the shard, under the cursor's lease, rather than in memory); listen
// batches are never held back, so a client that stops reading runs into its
// budget: a backlog over subscribe.Request.MaxBufferedBytes ends the
// subscribe with *subscribe.BufferError. There is no detach: the private
// reader already holds history, and a client that far behind on a private
// pipeline costs its memory alone.
//
// # The caller's duties
//
// A Subscribe implements subscribe.Subscription. Call Next from one
// goroutine; Frontier and QueuedBytes from any. Close it exactly once: Close
// cancels the pipeline, waits for its goroutine and expires its reader, so
// nothing outlives it.
//
//	s := dataflow.StartSubscribe(dataflow.SubscribeConfig{Request: req, Persist: p, MFP: mfp})
//	defer s.Close()
//	for {
//		rows, err := s.Next(ctx, 0)
//		if err != nil {
//			return err // io.EOF at UP TO; subscribe.ErrDropped; *subscribe.BufferError
//		}
//		send(rows)
//	}
package dataflow
