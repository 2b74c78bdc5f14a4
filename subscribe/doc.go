// Package subscribe is the contract between the adapter and the two paths
// that serve SUBSCRIBE: the fast path (package tail, a SharedTail per
// collection) and the dataflow path (package dataflow, a private pipeline
// per subscribe). Both take one Request and return a Subscription; both end
// a subscription with the same errors (ErrDropped, *BufferError, io.EOF at
// UP TO, *formatter.ResultSizeError past max_result_size). Which path serves
// a statement is the adapter's decision (its fastPathEligible); the client
// cannot tell them apart, since both format through package formatter.
//
// A subscribe to a query or view over one collection applies its bound
// map/filter/project: the fast path gets it as Request.Shape and evaluates
// it once per distinct Shape.Key and batch for every subscriber of that
// shape, routing rows through Shape.Index; the dataflow path gets it as
// its SubscribeConfig.MFP.
//
// The session drives a Subscription from its own goroutine:
//
//	sub, err := tails.Subscribe(ctx, req) // or dataflow.StartSubscribe(req, in)
//	if err != nil {
//		return err
//	}
//	defer sub.Close()
//	for {
//		rows, err := sub.Next(ctx, 0)
//		if errors.Is(err, io.EOF) {
//			return nil // UP TO reached
//		}
//		if err != nil {
//			return err // ErrDropped, *BufferError, ctx.Err(), storage
//		}
//		send(rows)
//	}
//
// Frontier and QueuedBytes may be read from any goroutine meanwhile; they
// back mz_internal.mz_subscriptions' delivered_frontier and queued_bytes.
//
// EndReason classifies the error a subscription ended with (UP TO,
// fell behind, history lost, dropped, error) the same way for both paths,
// for the statement log; a subscription that can detach its client
// implements Counters (the fast path).
package subscribe
