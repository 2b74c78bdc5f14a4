// Package server wires one shardtail process from a Config: the shared
// storage (blob and consensus, opened from URLs or given), the persist
// client, the coordinator (package adapter), the pgwire server, the
// HTTP server of /metrics, /healthz and /debug/pprof, and the HTTP change
// feed (package feed). It is the one place
// that knows the order these start and stop in; `shardtail serve` turns
// flags into a Config, and the test harness (internal/testserver) turns
// test options into one.
//
// The canonical use, in the shape of nats-server's RunServer:
//
//	err := server.Run(ctx, server.Config{BlobURL: "mem://", ConsensusURL: "mem://"})
//
// or, to learn the address before serving returns:
//
//	s, err := server.New(ctx, cfg) // listening and serving when it returns
//	if err != nil {
//		return err
//	}
//	fmt.Println("listening on", s.Addr())
//	err = s.Wait(ctx)                // ctx done (nil) or pgwire failed
//	return errors.Join(err, s.Close())
//
// Start order: storage, persist client (its metrics registered), the
// coordinator (catalog, oracle, owned shards, dataflows, tick), the pgwire
// server (wired back to the coordinator for pg_cancel_backend), the
// listeners (the HTTP change feed of package feed among them). Close stops
// them in the reverse order: connections first (clients get FATAL 57P01),
// then the HTTP server, the feed's streams, the coordinator, the
// persist client, and the storage New opened itself. Storage given opened
// in Config stays open, so a test can restart a server on the same data.
// When New fails part way it closes what it had started.
package server
