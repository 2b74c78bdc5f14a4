package persisttest

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardtail/shardtail/persist"
)

// BlobLargeValueSize is the size of the largest value TestBlob stores: above
// the S3 Blob's default multipart threshold (8 MiB), so that every backend
// proves it handles values that take its slow path.
const BlobLargeValueSize = 20 << 20

// TestBlob is the acceptance suite for persist.Blob: it pins the contract
// written on the interface. Every implementation runs it, the real servers
// included.
//
// newBlob returns a new, empty Blob on each call (one per subtest, so that
// subtests never see each other's keys); the suite closes it and fails if
// Close fails.
func TestBlob(t *testing.T, newBlob func(t *testing.T) persist.Blob) {
	t.Run("GetMissing", func(t *testing.T) {
		b := blobOpen(t, newBlob)
		got, err := b.Get(t.Context(), "missing/key")
		if !errors.Is(err, persist.ErrNotFound) || got != nil {
			t.Fatalf("Get(missing) = %q, %v; want nil, ErrNotFound", got, err)
		}
	})

	t.Run("SetGet", func(t *testing.T) {
		b := blobOpen(t, newBlob)
		values := []struct {
			key   string
			value []byte
		}{
			{"small", []byte("hello")},
			{"empty", []byte{}},
			{"binary", blobAllBytes()},
			{"large", blobRandom(BlobLargeValueSize, 1)},
		}
		for _, v := range values {
			blobMustSet(t, b, v.key, v.value)
		}
		for _, v := range values {
			got := blobMustGet(t, b, v.key)
			if !bytes.Equal(got, v.value) {
				t.Errorf("Get(%q): got %d bytes, want the %d bytes set", v.key, len(got), len(v.value))
			}
		}
		listed := blobList(t, b, "")
		for _, v := range values {
			if size, ok := listed[v.key]; !ok || size != int64(len(v.value)) {
				t.Errorf("List: key %q: got size %d (listed %v), want %d", v.key, size, ok, len(v.value))
			}
		}
	})

	t.Run("NoAliasing", func(t *testing.T) {
		b := blobOpen(t, newBlob)
		value := []byte("original")
		blobMustSet(t, b, "k", value)
		value[0] = 'X' // the caller reuses its buffer after Set returned
		got := blobMustGet(t, b, "k")
		if string(got) != "original" {
			t.Fatalf("Get after caller changed the Set buffer: got %q, want %q", got, "original")
		}
		got[0] = 'Y' // the caller scribbles on what Get returned
		if got := blobMustGet(t, b, "k"); string(got) != "original" {
			t.Fatalf("Get after caller changed an earlier Get result: got %q, want %q", got, "original")
		}
	})

	t.Run("Overwrite", func(t *testing.T) {
		b := blobOpen(t, newBlob)
		value := blobRandom(1000, 2)
		blobMustSet(t, b, "same", value)
		blobMustSet(t, b, "same", value) // a retried Set: idempotent
		if got := blobMustGet(t, b, "same"); !bytes.Equal(got, value) {
			t.Errorf("Get after Set twice with the same bytes: got %d bytes, want %d", len(got), len(value))
		}
		if got := blobList(t, b, ""); len(got) != 1 || got["same"] != int64(len(value)) {
			t.Errorf("List after Set twice: got %v, want map[same:%d]", got, len(value))
		}
		// persist never does this, but Set is atomic, so a later Get sees
		// the whole new value.
		blobMustSet(t, b, "same", []byte("new"))
		if got := blobMustGet(t, b, "same"); string(got) != "new" {
			t.Errorf("Get after overwrite: got %q, want %q", got, "new")
		}
	})

	t.Run("Delete", func(t *testing.T) {
		b := blobOpen(t, newBlob)
		blobMustSet(t, b, "d/1", []byte("one"))
		blobMustSet(t, b, "d/2", []byte("two"))
		for _, step := range []struct {
			key  string
			want bool
		}{
			{"d/1", true},      // existed
			{"d/1", false},     // deleted twice: no error
			{"d/never", false}, // never existed
			{"d", false},       // a prefix of keys, not a key
		} {
			existed, err := b.Delete(t.Context(), step.key)
			if err != nil || existed != step.want {
				t.Errorf("Delete(%q) = %v, %v; want %v, nil", step.key, existed, err, step.want)
			}
		}
		if got, err := b.Get(t.Context(), "d/1"); !errors.Is(err, persist.ErrNotFound) {
			t.Errorf("Get(deleted) = %q, %v; want ErrNotFound", got, err)
		}
		if got := blobMustGet(t, b, "d/2"); string(got) != "two" {
			t.Errorf("Get(sibling of deleted) = %q, want %q", got, "two")
		}
		if got := blobList(t, b, ""); len(got) != 1 || got["d/2"] != 3 {
			t.Errorf("List after Delete: got %v, want map[d/2:3]", got)
		}
	})

	t.Run("List", func(t *testing.T) {
		b := blobOpen(t, newBlob)
		keys := map[string]int64{"a/1": 1, "a/2": 2, "a/b/3": 3, "ab": 4, "abc/1": 5, "b": 6}
		for key, size := range keys {
			blobMustSet(t, b, key, bytes.Repeat([]byte{'x'}, int(size)))
		}
		for _, tc := range []struct {
			prefix string
			want   []string
		}{
			{"", []string{"a/1", "a/2", "a/b/3", "ab", "abc/1", "b"}},
			{"a/", []string{"a/1", "a/2", "a/b/3"}}, // not the sibling "ab"
			{"a", []string{"a/1", "a/2", "a/b/3", "ab", "abc/1"}},
			{"ab", []string{"ab", "abc/1"}},
			{"a/b", []string{"a/b/3"}},
			{"a/b/", []string{"a/b/3"}},
			{"a/1", []string{"a/1"}},
			{"abc/", []string{"abc/1"}},
			{"b/", nil}, // "b" is a key, not a directory of keys
			{"zz", nil},
			{"zz/", nil},
		} {
			got := blobList(t, b, tc.prefix)
			want := make(map[string]int64)
			for _, key := range tc.want {
				want[key] = keys[key]
			}
			if !maps.Equal(got, want) {
				t.Errorf("List(%q): got %v, want %v", tc.prefix, got, want)
			}
		}
	})

	t.Run("ListModified", func(t *testing.T) {
		// The sweep of orphaned blobs deletes only what was set longer ago
		// than a grace period, so List must date every key: never zero,
		// never before the Set began (S3 rounds down to the second), and not
		// absurdly late either (it is the store's clock, on this machine in
		// tests; a minute covers a slow server).
		b := blobOpen(t, newBlob)
		before := time.Now().Truncate(time.Second).Add(-time.Second)
		blobMustSet(t, b, "m/1", []byte("one"))
		blobMustSet(t, b, "m/2/x", []byte("two"))
		after := time.Now().Add(time.Minute)
		got := map[string]time.Time{}
		err := b.List(t.Context(), "m/", func(m persist.BlobMeta) error {
			got[m.Key] = m.Modified
			return nil
		})
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		for _, key := range []string{"m/1", "m/2/x"} {
			mod, ok := got[key]
			if !ok || mod.Before(before) || mod.After(after) {
				t.Errorf("List: key %q: got Modified %v (listed %v), want within [%v, %v]", key, mod, ok, before, after)
			}
		}
	})

	t.Run("ListCallbackError", func(t *testing.T) {
		b := blobOpen(t, newBlob)
		for i := range 5 {
			blobMustSet(t, b, fmt.Sprintf("e/%d", i), []byte{byte(i)})
		}
		stop := errors.New("stop here")
		calls := 0
		err := b.List(t.Context(), "e/", func(persist.BlobMeta) error {
			calls++
			return stop
		})
		if !errors.Is(err, stop) || calls != 1 {
			t.Fatalf("List with failing fn: got err %v after %d calls, want %v after 1", err, calls, stop)
		}
	})

	t.Run("DeleteDuringList", func(t *testing.T) {
		// The garbage collector's loop: list a shard's blobs and delete each
		// one from inside fn. It must neither deadlock nor fail.
		b := blobOpen(t, newBlob)
		for i := range 20 {
			blobMustSet(t, b, fmt.Sprintf("g/%d/p", i), []byte("x"))
		}
		deleted := 0
		err := b.List(t.Context(), "g/", func(m persist.BlobMeta) error {
			existed, err := b.Delete(t.Context(), m.Key)
			if err != nil {
				return err
			}
			if existed {
				deleted++
			}
			return nil
		})
		if err != nil || deleted != 20 {
			t.Fatalf("List deleting each key: got err %v and %d deleted, want nil and 20", err, deleted)
		}
		if got := blobList(t, b, ""); len(got) != 0 {
			t.Fatalf("List after deleting every key: got %v, want none", got)
		}
	})

	t.Run("KeysWithSlashes", func(t *testing.T) {
		b := blobOpen(t, newBlob)
		keys := []string{
			"s0123/v17/r6f1c0e8a-3b1e-4bde-9a43-5b0f1c2d3e4f",
			"s0123/v17/r0b8e5d9c-81a2-4f6b-a0d4-2e7c9f3b1a55",
			"s0123/v18/rollup",
			"s0123/a/b/c/d/e/f/g",
		}
		for _, key := range keys {
			blobMustSet(t, b, key, []byte(key))
		}
		for _, key := range keys {
			if got := blobMustGet(t, b, key); string(got) != key {
				t.Errorf("Get(%q) = %q, want the key itself", key, got)
			}
		}
		// Deleting the last key under a "directory" and setting a new one
		// there again works (the file Blob prunes empty directories).
		for _, key := range keys {
			if existed, err := b.Delete(t.Context(), key); err != nil || !existed {
				t.Fatalf("Delete(%q) = %v, %v; want true, nil", key, existed, err)
			}
		}
		if got := blobList(t, b, "s0123/"); len(got) != 0 {
			t.Fatalf("List after deleting every key: got %v, want none", got)
		}
		blobMustSet(t, b, keys[3], []byte("again"))
		if got := blobMustGet(t, b, keys[3]); string(got) != "again" {
			t.Fatalf("Get after re-creating a deleted path: got %q, want %q", got, "again")
		}
	})

	t.Run("InvalidKeys", func(t *testing.T) {
		// The grammar is the same for every backend, so that code tested
		// against one never meets a key another refuses.
		b := blobOpen(t, newBlob)
		for _, key := range []string{"", "/a", "a/", "a//b", "..", "../a", "a/../b", "a\x00b"} {
			if err := b.Set(t.Context(), key, []byte("x")); err == nil {
				t.Errorf("Set(%q) = nil, want an error", key)
			}
			if _, err := b.Get(t.Context(), key); err == nil || errors.Is(err, persist.ErrNotFound) {
				t.Errorf("Get(%q) = %v, want an error other than ErrNotFound", key, err)
			}
			if _, err := b.Delete(t.Context(), key); err == nil {
				t.Errorf("Delete(%q) = nil, want an error", key)
			}
		}
		for _, prefix := range []string{"/", "../", "a/../"} {
			err := b.List(t.Context(), prefix, func(persist.BlobMeta) error { return nil })
			if err == nil {
				t.Errorf("List(%q) = nil, want an error", prefix)
			}
		}
	})

	t.Run("ConcurrentDistinctKeys", func(t *testing.T) {
		b := blobOpen(t, newBlob)
		const workers, rounds = 8, 10
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for r := range rounds {
					key := fmt.Sprintf("c/%d/%d", w, r)
					value := blobRandom(1000+r, uint64(w*rounds+r))
					if err := b.Set(t.Context(), key, value); err != nil {
						t.Errorf("Set(%q): %v", key, err)
						return
					}
					got, err := b.Get(t.Context(), key)
					if err != nil || !bytes.Equal(got, value) {
						t.Errorf("Get(%q) after Set: got %d bytes, %v; want %d bytes", key, len(got), err, len(value))
						return
					}
				}
			})
		}
		wg.Wait()
		if got := blobList(t, b, "c/"); len(got) != workers*rounds {
			t.Errorf("List after concurrent Sets: got %d keys, want %d", len(got), workers*rounds)
		}
	})

	t.Run("ConcurrentSameKey", func(t *testing.T) {
		// Retried and racing writers of one blob: persist writes a key with
		// the same bytes every time.
		b := blobOpen(t, newBlob)
		const workers, rounds = 8, 10
		value := blobRandom(64<<10, 3)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range rounds {
					if err := b.Set(t.Context(), "same/key", value); err != nil {
						t.Errorf("Set: %v", err)
						return
					}
					got, err := b.Get(t.Context(), "same/key")
					if err != nil || !bytes.Equal(got, value) {
						t.Errorf("Get after Set: got %d bytes, %v; want %d bytes", len(got), err, len(value))
						return
					}
				}
			})
		}
		wg.Wait()
	})

	t.Run("NoPartialReads", func(t *testing.T) {
		// One writer replaces a value with another of a different size while
		// readers Get it: each read must be one whole value, never a mix, a
		// truncation or a spurious not-found.
		b := blobOpen(t, newBlob)
		values := [][]byte{bytes.Repeat([]byte{'a'}, 256<<10), bytes.Repeat([]byte{'b'}, 384<<10)}
		blobMustSet(t, b, "p/value", values[0])
		var done atomic.Bool
		var wg sync.WaitGroup
		wg.Go(func() {
			defer done.Store(true)
			for i := range 30 {
				if err := b.Set(t.Context(), "p/value", values[i%2]); err != nil {
					t.Errorf("Set: %v", err)
					return
				}
			}
		})
		for range 4 {
			wg.Go(func() {
				for reads := 0; reads < 3 || !done.Load(); reads++ {
					got, err := b.Get(t.Context(), "p/value")
					if err != nil {
						t.Errorf("Get during overwrites: %v", err)
						return
					}
					if !bytes.Equal(got, values[0]) && !bytes.Equal(got, values[1]) {
						t.Errorf("Get during overwrites: got %d bytes that are neither whole value", len(got))
						return
					}
				}
			})
		}
		wg.Wait()
	})
}

// BenchmarkBlobSetGet measures one Set and one Get of a 1 MiB value on b,
// which the caller opens and closes.
func BenchmarkBlobSetGet(bench *testing.B, b persist.Blob) {
	value := blobRandom(1<<20, 4)
	bench.SetBytes(int64(len(value)))
	bench.ReportAllocs()
	for i := 0; bench.Loop(); i++ {
		key := fmt.Sprintf("bench/%d", i%16)
		if err := b.Set(bench.Context(), key, value); err != nil {
			bench.Fatalf("Set: %v", err)
		}
		if _, err := b.Get(bench.Context(), key); err != nil {
			bench.Fatalf("Get: %v", err)
		}
	}
}

// blobOpen returns a new Blob from newBlob that is closed when t ends.
func blobOpen(t *testing.T, newBlob func(t *testing.T) persist.Blob) persist.Blob {
	t.Helper()
	b := newBlob(t)
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

func blobMustSet(t *testing.T, b persist.Blob, key string, value []byte) {
	t.Helper()
	if err := b.Set(t.Context(), key, value); err != nil {
		t.Fatalf("Set(%q, %d bytes): %v", key, len(value), err)
	}
}

func blobMustGet(t *testing.T, b persist.Blob, key string) []byte {
	t.Helper()
	got, err := b.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return got
}

// blobList returns the keys List reports under prefix, with their sizes, and
// fails t if List fails or reports a key twice or outside the prefix.
func blobList(t *testing.T, b persist.Blob, prefix string) map[string]int64 {
	t.Helper()
	got := make(map[string]int64)
	err := b.List(t.Context(), prefix, func(m persist.BlobMeta) error {
		if _, dup := got[m.Key]; dup {
			return fmt.Errorf("key %q listed twice", m.Key)
		}
		if len(m.Key) < len(prefix) || m.Key[:len(prefix)] != prefix {
			return fmt.Errorf("key %q listed outside prefix %q", m.Key, prefix)
		}
		got[m.Key] = m.Size
		return nil
	})
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return got
}

// blobRandom returns n pseudo-random bytes, the same for the same seed.
func blobRandom(n int, seed uint64) []byte {
	buf := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24)})
	_, _ = r.Read(buf)
	return buf
}

// blobAllBytes returns every byte value, twice, so that a backend that
// treats the value as text (NUL, newline, invalid UTF-8) is caught.
func blobAllBytes() []byte {
	var buf []byte
	for range 2 {
		for c := range 256 {
			buf = append(buf, byte(c))
		}
	}
	return buf
}
