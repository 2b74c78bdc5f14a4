//go:build unix

package file

import (
	"context"
	"errors"
	"testing"

	"github.com/shardtail/shardtail/persist"
)

// TestLend: Lend hands out the bytes Get returns, without a copy, until
// release; a value deleted meanwhile stays readable until then; a missing
// key is persist.ErrNotFound, as for Get.
func TestLend(t *testing.T) {
	ctx := context.Background()
	b := mustOpen(t, t.TempDir())
	mustSet(t, b, "a/part", "the bytes of a part")
	mustSet(t, b, "a/empty", "")
	for _, key := range []string{"a/part", "a/empty"} {
		want, err := b.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		got, release, err := b.Lend(ctx, key)
		if err != nil {
			t.Fatalf("Lend(%q): %v", key, err)
		}
		if _, err := b.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("Lend(%q) = %q, want %q", key, got, want)
		}
		release()
	}
	if _, _, err := b.Lend(ctx, "a/missing"); !errors.Is(err, persist.ErrNotFound) {
		t.Errorf("Lend of a missing key: %v, want ErrNotFound", err)
	}
}
