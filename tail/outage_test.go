package tail

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shardtail/shardtail/formatter"
	"github.com/shardtail/shardtail/persist"
	blobmem "github.com/shardtail/shardtail/persist/blob/mem"
	consmem "github.com/shardtail/shardtail/persist/consensus/mem"
	"github.com/shardtail/shardtail/persist/txnwal"
	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/subscribe"
)

// outage is a process's view of the shared storage that can be cut: while
// a part of it is down, every operation on it fails as an unreachable
// server's would (a determinate error: nothing was sent).
type outage struct {
	// eof makes blob failures what an S3 GET through a proxy that accepts
	// and hangs up returns: an error wrapping io.EOF.
	eof bool

	mu       sync.Mutex
	blobDown bool
	// consDown is the consensus keys that are down; all of them with "".
	consDown map[string]bool
}

var errCut = errors.New("storage unreachable (test)")

func (o *outage) set(blob bool, keys ...string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.blobDown = blob
	o.consDown = map[string]bool{}
	for _, k := range keys {
		o.consDown[k] = true
	}
}

func (o *outage) blob(key string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case !o.blobDown:
		return nil
	case o.eof:
		return fmt.Errorf("s3 blob: get %s: %w", key, &url.Error{Op: "Get", URL: "http://127.0.0.1:9000/bucket/" + key, Err: io.EOF})
	}
	return errCut
}

func (o *outage) cons(key string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.consDown[""] || o.consDown[key] {
		return errCut
	}
	return nil
}

// cutBlob is a Blob behind an outage. It hides the inner blob's Lend, so
// that every part read is a Get.
type cutBlob struct {
	persist.Blob
	o *outage
}

func (b cutBlob) Get(ctx context.Context, key string) ([]byte, error) {
	if err := b.o.blob(key); err != nil {
		return nil, err
	}
	return b.Blob.Get(ctx, key)
}

func (b cutBlob) Set(ctx context.Context, key string, value []byte) error {
	if err := b.o.blob(key); err != nil {
		return err
	}
	return b.Blob.Set(ctx, key, value)
}

// cutConsensus is a Consensus behind an outage.
type cutConsensus struct {
	persist.Consensus
	o *outage
}

func (c cutConsensus) Head(ctx context.Context, key string) (*persist.VersionedData, error) {
	if err := c.o.cons(key); err != nil {
		return nil, err
	}
	return c.Consensus.Head(ctx, key)
}

func (c cutConsensus) Scan(ctx context.Context, key string, from persist.SeqNo, limit int) ([]persist.VersionedData, error) {
	if err := c.o.cons(key); err != nil {
		return nil, err
	}
	return c.Consensus.Scan(ctx, key, from, limit)
}

func (c cutConsensus) CompareAndSet(ctx context.Context, key string, expected *persist.SeqNo, new persist.VersionedData) (bool, error) {
	if err := c.o.cons(key); err != nil {
		return false, err
	}
	return c.Consensus.CompareAndSet(ctx, key, expected, new)
}

func (c cutConsensus) Truncate(ctx context.Context, key string, seqno persist.SeqNo) (int, error) {
	if err := c.o.cons(key); err != nil {
		return 0, err
	}
	return c.Consensus.Truncate(ctx, key, seqno)
}

// process is one server's persist client and txn-wal handle.
type process struct {
	p  *persist.Client
	tx *txnwal.Txns
}

func openProcess(t *testing.T, ctx context.Context, blob persist.Blob, cons persist.Consensus) *process {
	t.Helper()
	p, err := persist.NewClient(blob, cons, persist.Config{PollInterval: 20 * time.Millisecond, ReaderHeartbeat: -1, CompactionMinInputs: -1})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := txnwal.Open(ctx, p, txnwal.Config{PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	p.SetTxnReads(tx)
	t.Cleanup(func() { tx.Close(); p.Close() })
	return &process{p: p, tx: tx}
}

// oracle issues strictly increasing epoch-millisecond timestamps, as
// catalog.Oracle does (the window keeps batches by their age).
type oracle struct {
	mu   sync.Mutex
	last uint64
}

func (o *oracle) ts(_ context.Context, min uint64) (uint64, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.last = max(o.last+1, min, uint64(time.Now().UnixMilli()))
	return o.last, nil
}

// TestOutageWritesFromUpstream is TestStorageOutage as a tail process sees
// it (deploytest.TestProxyStorageOutage): the table is a txn-wal data
// shard written by another process (the upstream), which still reaches the
// storage while this one does not, and writes, ticks, reads and compacts
// meanwhile. When the storage comes back the subscriber goes on with the
// rows written during the outage, without a gap, duplicate or error,
// whichever part of the storage was cut: all of it, only the data shard's
// state (the tail's txn-wal cache then knows of writes its data shard's
// cache has not seen), or only blob (the listen finds a batch it cannot
// read, and must resume at the same frontier).
func TestOutageWritesFromUpstream(t *testing.T) {
	for _, tc := range []struct {
		name     string
		blob     bool
		eof      bool
		keys     func(shard string) []string
		compact  bool
		restored func(o *outage, shard string) // how the storage comes back
	}{
		{name: "Everything", blob: true, keys: func(string) []string { return []string{""} }},
		{name: "EverythingCompacted", blob: true, keys: func(string) []string { return []string{""} }, compact: true},
		{name: "DataShardState", keys: func(shard string) []string { return []string{shard} }},
		{name: "TxnsShard", keys: func(string) []string { return []string{txnwal.DefaultKey} }},
		{name: "BlobOnly", blob: true, keys: func(string) []string { return nil }},
		// What deploytest.TestProxyStorageOutage met: GETs that fail with
		// `Get "...": EOF`, once read as the end of the batch's data.
		{name: "BlobOnlyEOF", blob: true, eof: true, keys: func(string) []string { return nil }},
		{name: "EverythingEOF", blob: true, eof: true, keys: func(string) []string { return []string{""} }, compact: true},
		{name: "TxnsBackFirst", blob: true, keys: func(string) []string { return []string{""} },
			restored: func(o *outage, shard string) {
				o.set(true, shard)
				time.Sleep(100 * time.Millisecond)
			}},
		{name: "DataBackFirst", blob: true, keys: func(string) []string { return []string{""} },
			restored: func(o *outage, shard string) {
				o.set(false, txnwal.DefaultKey)
				time.Sleep(100 * time.Millisecond)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			blob, cons := blobmem.New(), consmem.New()
			o := &outage{eof: tc.eof}
			up := openProcess(t, ctx, blob, cons)
			tail := openProcess(t, ctx, cutBlob{blob, o}, cutConsensus{cons, o})
			m := NewManager(tail.p, Config{})
			defer m.Close()
			clock := &oracle{}

			shard := persist.NewShardID()
			if _, err := up.p.CreateShard(ctx, shard, schema); err != nil {
				t.Fatal(err)
			}
			if err := up.tx.Register(ctx, shard); err != nil {
				t.Fatal(err)
			}
			insert := func(k int64) uint64 {
				t.Helper()
				b, err := up.tx.WriteBatch(ctx, shard, []row.Update{ins(k, fmt.Sprint("v", k))})
				if err != nil {
					t.Fatal(err)
				}
				ts, err := up.tx.Commit(ctx, []txnwal.Write{{Shard: shard, Batch: b}}, nil, clock.ts)
				if err != nil {
					t.Fatal(err)
				}
				return ts
			}
			tick := func() {
				t.Helper()
				if _, err := up.tx.Advance(ctx, clock.ts); err != nil {
					t.Fatal(err)
				}
			}
			insert(1)
			tick()

			// The subscribe, in the tail process, at its latest complete
			// time.
			st, err := tail.p.ReadState(ctx, shard)
			if err != nil {
				t.Fatal(err)
			}
			s, err := m.Subscribe(ctx, subscribe.Request{Shard: shard, AsOf: st.Upper - 1, Snapshot: true,
				Output: &formatter.Options{Relation: schema, Progress: true}})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			rows := make(chan []formatter.Row)
			errc := make(chan error, 1)
			sctx, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			defer func() {
				stop()
				<-done // the last Next, then Close
				s.Close()
			}()
			go func() {
				defer close(done)
				for {
					r, err := s.Next(sctx, 0)
					if err != nil {
						errc <- err
						return
					}
					select {
					case rows <- r:
					case <-sctx.Done():
						errc <- sctx.Err()
						return
					}
				}
			}()
			// until takes rows until the subscriber's progress passes ts.
			until := func(ts uint64) {
				t.Helper()
				for {
					select {
					case r := <-rows:
						for _, x := range r {
							if !x.Progressed {
								got = append(got, fmt.Sprint(x.Columns()[1:]))
							}
						}
						if last := r[len(r)-1]; last.Progressed && last.Time > ts {
							return
						}
					case err := <-errc:
						t.Fatalf("the subscriber ended: %v (rows %q)", err, got)
					case <-ctx.Done():
						t.Fatalf("no progress past %d (rows %q)", ts, got)
					}
				}
			}
			until(insert(2))

			o.set(tc.blob, tc.keys(shard)...)
			retries := testutil.ToFloat64(m.Metrics().storageRetries)
			// During the outage the upstream writes, ticks, serves a read
			// (which advances the data shard's upper) and compacts.
			insert(3)
			for range 3 {
				tick()
			}
			if _, err := up.p.WaitForUpper(ctx, shard, clock.last-1); err != nil {
				t.Fatal(err)
			}
			insert(4)
			tick()
			if tc.compact {
				if _, err := up.p.Maintain(ctx, shard); err != nil {
					t.Fatal(err)
				}
			}
			// Ticks until the tail's listen met the outage (it may not,
			// when only the txns shard is cut: it then reads the data
			// shard's writes as they are applied).
			for i := 0; i < 50 && testutil.ToFloat64(m.Metrics().storageRetries) == retries; i++ {
				tick()
				select {
				case r := <-rows:
					for _, x := range r {
						if !x.Progressed {
							got = append(got, fmt.Sprint(x.Columns()[1:]))
						}
					}
				case err := <-errc:
					t.Fatalf("the subscriber ended during the outage: %v", err)
				case <-time.After(20 * time.Millisecond):
				}
			}
			if tc.restored != nil {
				tc.restored(o, shard)
			}
			o.set(false)
			until(insert(5))
			want := []string{"[1 v1]", "[2 v2]", "[3 v3]", "[4 v4]", "[5 v5]"}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("rows across the outage: %q, want %q", got, want)
			}
		})
	}
}
