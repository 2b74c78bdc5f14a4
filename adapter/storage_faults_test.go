package adapter_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardtail/shardtail/internal/testsupport/testserver"
	"github.com/shardtail/shardtail/persist"
	blobmem "github.com/shardtail/shardtail/persist/blob/mem"
)

// faultyBlob is a blob store whose reads fail while down, as an
// unreachable object store's do.
type faultyBlob struct {
	persist.Blob
	down atomic.Bool
}

var errBlobDown = errors.New("dial tcp 10.0.0.1:9000: connect: connection refused")

func (b *faultyBlob) Get(ctx context.Context, key string) ([]byte, error) {
	if b.down.Load() {
		return nil, errBlobDown
	}
	return b.Blob.Get(ctx, key)
}

// partKeys returns the keys of the parts in blob (not the state rollups).
func partKeys(t *testing.T, b persist.Blob) []string {
	t.Helper()
	var keys []string
	err := b.List(context.Background(), "", func(m persist.BlobMeta) error {
		if i := strings.LastIndexByte(m.Key, '/'); i >= 0 && strings.HasPrefix(m.Key[i+1:], "p") {
			keys = append(keys, m.Key)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		t.Fatal("no parts in blob")
	}
	return keys
}

// statementsReading are the statements that read table t's data, each
// on every path it can take.
var statementsReading = []struct{ name, setup, stmt string }{
	{"Select", "", "SELECT * FROM t"},
	{"SubscribeFastPath", "SET enable_subscribe_persist_fast_path = on", "SUBSCRIBE"},
	{"SubscribeDataflow", "SET enable_subscribe_persist_fast_path = off", "SUBSCRIBE"},
}

// runReading runs one of statementsReading on a new connection and
// returns its error.
func runReading(t *testing.T, s *testserver.Server, setup, stmt string) error {
	t.Helper()
	c := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
	if setup != "" {
		mustExec(t, c, setup)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if stmt == "SUBSCRIBE" {
		_, err := fetchSnapshot(ctx, c, "SUBSCRIBE t WITH (PROGRESS)")
		return err
	}
	_, err := tryQueryRows(c, stmt)
	return err
}

// TestStorageFaultCodes checks that a storage fault has one SQLSTATE
// whatever statement meets it: 58000 for a blob store that fails, XX001
// with the part's key for a part that is missing or corrupt.
func TestStorageFaultCodes(t *testing.T) {
	for _, st := range statementsReading {
		t.Run(st.name, func(t *testing.T) {
			t.Run("Unavailable", func(t *testing.T) {
				blob := &faultyBlob{Blob: blobmem.New()}
				s := testserver.Start(t, testserver.Options{Blob: blob})
				mustExec(t, connect(t, s), "CREATE TABLE t (a int8)", "INSERT INTO t VALUES (1), (2)")
				blob.down.Store(true)
				pe := wantCode(t, runReading(t, s, st.setup, st.stmt), "58000", st.stmt)
				if pe != nil && !strings.HasPrefix(pe.Message, "shared storage unavailable") {
					t.Errorf("message %q, want shared storage unavailable", pe.Message)
				}
			})
			for _, damage := range []struct {
				name string
				do   func(ctx context.Context, b persist.Blob, key string) error
			}{
				{"MissingPart", func(ctx context.Context, b persist.Blob, key string) error {
					_, err := b.Delete(ctx, key)
					return err
				}},
				{"CorruptPart", func(ctx context.Context, b persist.Blob, key string) error {
					data, err := b.Get(ctx, key)
					if err != nil {
						return err
					}
					bad := append([]byte(nil), data...)
					for i := len(bad) / 3; i < len(bad)/2; i++ {
						bad[i] ^= 0x5a
					}
					return b.Set(ctx, key, bad)
				}},
			} {
				t.Run(damage.name, func(t *testing.T) {
					blob := blobmem.New()
					s := testserver.Start(t, testserver.Options{Blob: blob})
					mustExec(t, connect(t, s), "CREATE TABLE t (a int8, b text)", "INSERT INTO t VALUES (1, 'one'), (2, 'two')")
					keys := partKeys(t, blob)
					for _, k := range keys {
						if err := damage.do(context.Background(), blob, k); err != nil {
							t.Fatal(err)
						}
					}
					pe := wantCode(t, runReading(t, s, st.setup, st.stmt), "XX001", st.stmt)
					if pe == nil {
						return
					}
					if pe.Message != "data corrupted" {
						t.Errorf("message %q, want data corrupted", pe.Message)
					}
					found := false
					for _, k := range keys {
						found = found || strings.Contains(pe.Detail, k)
					}
					if !found {
						t.Errorf("detail %q names none of the parts %q", pe.Detail, keys)
					}
				})
			}
		})
	}
}
