// Package dataflow runs the pipelines that read a collection's shard,
// apply a map/filter/project (an MFP) to its updates, and send the result
// on. It has two uses, which share the MFP loop (Apply) and the snapshot
// drain:
//
//   - Subscribe, the dataflow path of SUBSCRIBE: one private pipeline per
//     subscribe, for what the fast path (package tail) cannot serve (a
//     query over a collection, a view, the flag off). Its goroutine
//     registers a reader, reads and consolidates the snapshot through the
//     MFP, follows a listen, and formats rows into a queue that the
//     client's session drains with Next. It never waits for the client: a
//     backlog over the budget ends it with a *subscribe.BufferError.
//   - Background jobs that write a collection of their own: View maintains
//     a materialized view, Source runs a load generator. Start runs a Job
//     on a goroutine it owns, restarting it with a backoff after an error
//     (a storage outage) until Stop, or until its shard is dropped. Jobs
//     write through Storage, the adapter's owned shards.
//
// The dataflow path is the baseline of every comparison, so it is a
// competent implementation with no artificial delay: the fast path has to
// win by sharing work.
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
// With SubscribeConfig.Budget (--memory-budget) the queue, the snapshot
// read ahead to be consolidated (through an MFP) and the timestamp held
// back to be ordered are charged to the process's budget, and every push
// runs its policy (membudget.Budget.Enforce). Each subscribe is a victim of
// the policy's last resort: once the fast path's stages (shrink windows and
// shares, detach the largest queues) leave the process over budget, the
// largest dataflow subscribes, one at a time while still over, end with a
// *subscribe.MemoryBudgetError (53200, naming the budget); the client
// resubscribes AS OF its last progress.
//
// # Materialized views
//
// A View's Run has three steps, and each restart runs them again from
// what the view's shard holds:
//
//  1. Choose the time to resume at: the input's latest on the first run;
//     after a restart, the view's upper less one, or the input's since if
//     the input compacted past it while the view was down.
//  2. Correct: if the view has nothing at that time, write in one batch at
//     it the difference between a fresh evaluation of the input and what
//     the view holds (everything, on the first run).
//  3. Follow: listen to the input and append each batch, mapped, so that
//     the view's upper tracks the input's frontier.
//
// A batch the view cannot evaluate (a division by zero) stalls the view:
// Stalled reports the error, which readers return instead of waiting, and
// later batches are held with it until the bad rows are retracted.
//
// # The caller's duties
//
//  1. A Subscribe implements subscribe.Subscription. Call its Next from one
//     goroutine, Frontier and QueuedBytes from any, and Close it exactly
//     once: Close cancels the pipeline, waits for its goroutine and expires
//     its reader, so nothing outlives it.
//  2. Stop every Handle that Start returned before closing the persist
//     client and the Storage the jobs write through.
//  3. An MFP must be a pure function of the row (besides the time it was
//     bound at), so that applying it to updates and consolidating the
//     result is correct.
//
// # Examples
//
// A subscribe on the dataflow path:
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
//
// The adapter starts a materialized view's maintenance when the view is
// created or the server restarts, and stops it when the view is dropped:
//
//	h := dataflow.Start(ctx, log, "mv", dataflow.NewView(dataflow.ViewConfig{
//		Persist: client, Storage: storage, Name: "mv",
//		Input: inputShard, Shard: viewShard,
//		MFP: func() dataflow.MFP { return plan.bind(nil) },
//	}))
//	...
//	if err := h.Stalled(); err != nil {
//		return err // a reader of the view
//	}
//	...
//	h.Stop()
package dataflow
