package feed_test

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shardtail/shardtail/internal/testsupport/testserver"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// TestJSONTypesGolden pins the JSON of a row of every column type as the
// feed sends it (?live=false over a real table): the envelope of
// pgrepr.AppendJSONValue's contract, mz_timestamp a string and mz_diff a
// number. A browser or program parses exactly this; change it only with a
// release note. -update rewrites testdata/types.golden.
func TestJSONTypesGolden(t *testing.T) {
	srv := start(t, testserver.Options{})
	c := connect(t, srv)
	execAll(t, c,
		`CREATE TABLE types (id int, b bool, i2 smallint, i4 int, i8 bigint, f4 real, f8 double precision, n numeric,
			t text, by bytea, ts timestamp, tz timestamptz, d date, j jsonb, u uuid)`,
		`INSERT INTO types VALUES (1, true, -32768, 2147483647, 9007199254740993, 1.5, 0.1, 12345678901234567890.000001,
			'Grüße "q" \ tab	end', '\x0aff', '2026-07-18 10:00:00.000123', '2026-07-18 10:00:00.5+00', '2026-07-18',
			'{"a": [1, null, "x"]}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11')`,
		`INSERT INTO types VALUES (2, false, 0, 0, -1, 'NaN', 'Infinity', 'NaN', '', '\x', 'infinity', '-infinity', '2000-01-01', 'null', NULL)`,
		`INSERT INTO types (id) VALUES (3)`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp := get(t, ctx, "http://"+srv.FeedAddr+"/v1/subscribe/types?live=false")
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d, %v: %s", resp.StatusCode, err, body)
	}
	frontier := resp.Header.Get("Shardtail-Frontier")
	var rows []json.RawMessage
	if err := json.Unmarshal(body, &rows); err != nil {
		t.Fatalf("body is not a JSON array: %v\n%s", err, body)
	}
	// One row per line, sorted by id, the timestamp (frontier-1) as T.
	lines := make([]string, len(rows))
	for _, r := range rows {
		var id struct{ ID int }
		if err := json.Unmarshal(r, &id); err != nil || id.ID < 1 || id.ID > len(rows) {
			t.Fatalf("row %s: id %d, %v", r, id.ID, err)
		}
		lines[id.ID-1] = replaceTimestamp(t, string(r), frontier)
	}
	got := strings.Join(lines, "\n") + "\n"
	path := filepath.Join("testdata", "types.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("rows differ from %s (rerun with -update after checking):\n got:\n%s\nwant:\n%s", path, got, want)
	}
}
