package codec

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/shardtail/shardtail/row"
)

// fuzzSchemas are the schemas FuzzDecodePart decodes with, chosen by the
// input's first argument.
var fuzzSchemas = []row.Schema{
	allTypesSchema(true),
	allTypesSchema(false),
	{},
	benchSchema,
}

// fuzzSeeds returns, per fuzz schema, an empty part, a one-batch part and
// a multi-batch part with NULLs.
func fuzzSeeds(t testing.TB) (schemas []uint8, parts [][]byte) {
	for si, s := range fuzzSchemas {
		var us []row.Update
		for i := range 6 {
			r := make(row.Row, len(s.Columns))
			for j, c := range s.Columns {
				vals := edgeValues(c.Type)
				if !c.Nullable || (i+j)%3 != 0 {
					r[j] = vals[(i+j)%len(vals)]
				}
				if c.Type == row.TypeText && r[j] != nil {
					r[j] = fmt.Sprintf("v%dé", i) // keep seeds small
				}
			}
			us = append(us, row.Update{Row: r, T: uint64(i % 2), Diff: int64(i%3 - 1)})
		}
		us = row.Consolidate(us)
		for _, p := range []struct {
			c  Config
			us []row.Update
		}{{Config{}, nil}, {Config{}, us[:min(2, len(us))]}, {Config{BatchRows: 2}, us}} {
			data, _, err := p.c.EncodePart(s, p.us)
			if err != nil {
				t.Fatal(err)
			}
			schemas, parts = append(schemas, uint8(si)), append(parts, data)
		}
	}
	return schemas, parts
}

var updateFuzzSeeds = flag.Bool("update-fuzz-seeds", false, "rewrite testdata/fuzz/FuzzDecodePart/seed-*")

// TestFuzzSeedsCurrent checks that the committed seeds are still valid
// parts (the fuzzer should start from inputs that decode, not from ones a
// format change made into early errors); rewrite them with
// -update-fuzz-seeds. It does not compare bytes: compressed output may
// change with the zstd version.
func TestFuzzSeedsCurrent(t *testing.T) {
	schemas, parts := fuzzSeeds(t)
	dir := filepath.Join("testdata", "fuzz", "FuzzDecodePart")
	for i := range parts {
		path := filepath.Join(dir, fmt.Sprintf("seed-%02d", i))
		if *updateFuzzSeeds {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			content := fmt.Sprintf("go test fuzz v1\nuint8(%d)\n[]byte(%q)\n", schemas[i], parts[i])
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		content, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -run TestFuzzSeedsCurrent -update-fuzz-seeds)", err)
		}
		var si uint8
		var data string
		if _, err := fmt.Sscanf(string(content), "go test fuzz v1\nuint8(%d)\n[]byte(%q)\n", &si, &data); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if _, err := DecodePart(fuzzSchemas[si], []byte(data)); err != nil {
			t.Fatalf("%s no longer decodes (run go test -run TestFuzzSeedsCurrent -update-fuzz-seeds): %v", path, err)
		}
	}
}

// FuzzDecodePart feeds arbitrary bytes to the decoder under one of a few
// schemas. It must never panic or hang; an error must be one of the
// sentinels; and whatever decodes must be valid, consolidated updates of
// the schema that encode and decode back to themselves.
func FuzzDecodePart(f *testing.F) {
	schemas, parts := fuzzSeeds(f)
	for i := range parts {
		f.Add(schemas[i], parts[i])
	}
	f.Fuzz(func(t *testing.T, si uint8, data []byte) {
		s := fuzzSchemas[int(si)%len(fuzzSchemas)]
		got, err := DecodePart(s, data)
		batches, rerr := readAll(Config{}, s, data)
		if (err == nil) != (rerr == nil) {
			t.Fatalf("DecodePart err %v, PartReader err %v", err, rerr)
		}
		if err != nil {
			checkClassified(t, err)
			return
		}
		var flat []row.Update
		for _, b := range batches {
			flat = append(flat, b...)
		}
		if err := diffUpdates(got, flat); err != nil {
			t.Fatalf("PartReader disagrees with DecodePart: %v", err)
		}
		for i, u := range got {
			if err := row.CheckRow(s, u.Row); err != nil {
				t.Fatalf("update %d: %v", i, err)
			}
		}
		if !row.IsConsolidated(got) {
			t.Fatal("decoded updates are not consolidated")
		}
		again, _, err := EncodePart(s, got)
		if err != nil {
			t.Fatalf("decoded updates do not re-encode: %v", err)
		}
		if err := diffUpdates(got, mustDecode(t, s, again)); err != nil {
			t.Fatalf("decoded updates do not round-trip: %v", err)
		}
	})
}
