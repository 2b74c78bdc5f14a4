package mem

import (
	"testing"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/persist/persisttest"
)

func TestBlob(t *testing.T) {
	persisttest.TestBlob(t, func(t *testing.T) persist.Blob { return New() })
}

func BenchmarkSetGet(b *testing.B) {
	blob := New()
	defer blob.Close()
	persisttest.BenchmarkBlobSetGet(b, blob)
}
