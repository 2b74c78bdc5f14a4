package formatter

import (
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/shardtail/shardtail/persist/codec"
	"github.com/shardtail/shardtail/pgrepr"
	"github.com/shardtail/shardtail/row"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// allTypes is a relation with a column of every type.
var allTypes = row.Schema{Columns: []row.Column{
	{Name: "b", Type: row.TypeBool, Nullable: true},
	{Name: "i2", Type: row.TypeInt2, Nullable: true},
	{Name: "i4", Type: row.TypeInt4, Nullable: true},
	{Name: "i8", Type: row.TypeInt8, Nullable: true},
	{Name: "f4", Type: row.TypeFloat4, Nullable: true},
	{Name: "f8", Type: row.TypeFloat8, Nullable: true},
	{Name: "n", Type: row.TypeNumeric, Nullable: true},
	{Name: "t", Type: row.TypeText, Nullable: true},
	{Name: "by", Type: row.TypeBytea, Nullable: true},
	{Name: "ts", Type: row.TypeTimestamp, Nullable: true},
	{Name: "tz", Type: row.TypeTimestampTZ, Nullable: true},
	{Name: "d", Type: row.TypeDate, Nullable: true},
	{Name: "j", Type: row.TypeJSONB, Nullable: true},
	{Name: "u", Type: row.TypeUUID, Nullable: true},
}}

func allTypesRows() []Row {
	full := row.Row{true, int16(-2), int32(40000), int64(-9007199254740993), float32(1.5), float64(-0.1),
		row.Numeric("-12345.678"), "tab\there \"q\" ,comma\nline", []byte{0, 1, 0xfe}, row.Timestamp(1700000000123456),
		row.TimestampTZ(-1), row.Date(19723), row.JSON(`{"a": [1, "x"]}`),
		row.UUID{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0}}
	nulls := make(row.Row, len(full))
	return []Row{
		{Time: 1700000000000, Progressed: true},
		{Time: 1700000000000, Tail: append(row.Row{int64(2)}, full...)},
		{Time: 1700000000001, Tail: append(row.Row{int64(-1)}, nulls...)},
	}
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs:\n got:\n%s\nwant:\n%s", name, got, want)
	}
}

// TestEncodeGolden pins the wire bytes of SUBSCRIBE rows of every column
// type: DataRow in text and binary result formats, and COPY in text, csv
// and binary. The values' representations are cross-checked against
// PostgreSQL in pgrepr's golden tests; these pin the framing.
func TestEncodeGolden(t *testing.T) {
	opts := &Options{Relation: allTypes, Progress: true}
	rows := allTypesRows()
	for _, tc := range []struct {
		name    string
		formats []int16
	}{{"datarow_text.golden", nil}, {"datarow_binary.golden", []int16{1}}} {
		var sb strings.Builder
		enc := NewEncoder(opts, tc.formats)
		for _, r := range rows {
			fmt.Fprintf(&sb, "%s\n", hex.EncodeToString(enc.AppendDataRow(nil, r)))
		}
		golden(t, tc.name, sb.String())
	}
	for _, tc := range []struct {
		name   string
		format CopyFormat
	}{{"copy_text.golden", CopyText}, {"copy_csv.golden", CopyCSV}, {"copy_binary.golden", CopyBinary}} {
		enc := NewCopyEncoder(opts, tc.format)
		data := enc.AppendHeader(nil)
		for _, r := range rows {
			data = enc.AppendRow(data, r)
		}
		data = enc.AppendTrailer(data)
		got := string(data)
		if tc.format == CopyBinary {
			got = hex.Dump(data)
		}
		golden(t, tc.name, got)
	}
}

// TestSharedMessages: a shared row is encoded once per wire format and
// every caller gets the same bytes.
func TestSharedMessages(t *testing.T) {
	opts := &Options{Relation: allTypes}
	rows := Shared(allTypesRows()[1:])
	enc := NewEncoder(opts, nil)
	var b1, b2 []byte
	m1 := Messages(enc, rows, &b1)
	m2 := Messages(enc, rows, &b2)
	for i := range m1 {
		if &m1[i][0] != &m2[i][0] {
			t.Fatalf("row %d encoded twice", i)
		}
		if string(m1[i]) != string(enc.AppendDataRow(nil, rows[i])) {
			t.Fatalf("row %d: cached bytes differ from a fresh encoding", i)
		}
	}
	bin := NewEncoder(opts, []int16{1})
	if string(Messages(bin, rows, &b1)[0]) == string(m1[0]) {
		t.Fatal("binary and text formats share a cache entry")
	}
}

// TestCachedEncodingWhileEncoding: a shared group's cached encoding is
// found without waiting for the group's lock, which a reader encoding the
// group in another format holds: every subscriber of a batch looks its
// bytes up as the batch is fanned out, and must not queue behind the
// others. A lookup that waited would deadlock here: the encoding waits
// for it.
func TestCachedEncodingWhileEncoding(t *testing.T) {
	opts := &Options{Relation: allTypes}
	rows := Shared(allTypesRows()[1:])
	text := NewEncoder(opts, nil)
	var b []byte
	want := Messages(text, rows, &b)
	encoding, release := make(chan struct{}), make(chan struct{})
	slow := &blockingWire{Wire: NewEncoder(opts, []int16{1}), started: encoding, release: release}
	done := make(chan [][]byte)
	go func() {
		var b []byte
		done <- Messages(slow, rows, &b)
	}()
	<-encoding
	got := Messages(text, rows, &b)
	runs := Runs(text, rows, &b)
	close(release)
	for i := range want {
		if &got[i][0] != &want[i][0] {
			t.Errorf("row %d: not the cached bytes while another format encodes", i)
		}
	}
	if len(runs) != 1 || !bytes.Equal(runs[0], bytes.Join(want, nil)) {
		t.Errorf("runs while another format encodes: got %q, want the cached messages", runs)
	}
	bin := <-done
	if bytes.Equal(bin[0], want[0]) {
		t.Error("the binary format got the text encoding")
	}
	if again := Messages(slow, rows, &b); &again[0][0] != &bin[0][0] {
		t.Error("the binary format encoded twice")
	}
}

// blockingWire is a Wire whose first AppendMessage closes started and
// waits for release.
type blockingWire struct {
	Wire
	started, release chan struct{}
	once             sync.Once
}

func (w *blockingWire) AppendMessage(buf []byte, r Row) []byte {
	w.once.Do(func() {
		close(w.started)
		<-w.release
	})
	return w.Wire.AppendMessage(buf, r)
}

// TestRuns: Runs returns what Messages does, back to back in runs: a run
// of one shared group is a slice of its cached bytes, and the unshared
// rows between are encoded together.
func TestRuns(t *testing.T) {
	opts := &Options{Relation: allTypes}
	enc := NewEncoder(opts, nil)
	all := allTypesRows()
	g1, g2 := Shared(slices.Clone(all[1:])), Shared(slices.Clone(all[1:]))
	plain := slices.Clone(all[1:3])
	// Unshared, part of g1, unshared, the rest of g1 (a new run: not
	// consecutive with the first part), all of g2.
	rows := slices.Concat(plain[:1], g1[:1], plain, g1[1:], g2)
	var mbuf, rbuf []byte
	var want []byte
	for _, m := range Messages(enc, rows, &mbuf) {
		want = append(want, m...)
	}
	runs := Runs(enc, rows, &rbuf)
	if got := bytes.Join(runs, nil); !bytes.Equal(got, want) {
		t.Fatalf("runs joined differ from the messages:\n got %q\nwant %q", got, want)
	}
	if got, wantRuns := len(runs), 5; got != wantRuns {
		t.Fatalf("got %d runs, want %d", got, wantRuns)
	}
	var b []byte
	if &runs[4][0] != &Messages(enc, g2, &b)[0][0] {
		t.Error("a shared group's run is not its cached bytes")
	}
}

// TestStreamRuns: StreamRuns returns Runs's bytes. A group whose reader
// is alone on it (WithSolo) is encoded into the caller's buffer, not into
// the group's cache, and the buffer is counted by Hold until Release; a
// group with readers besides, or with the encoding cached already, is its
// cached bytes.
func TestStreamRuns(t *testing.T) {
	opts := &Options{Relation: allTypes}
	all := allTypesRows()
	progress := opts.ProgressRow(9)
	for _, tc := range []struct {
		name   string
		alone  bool
		cached bool // encoded into the cache before StreamRuns
		own    bool // StreamRuns encodes the group itself
	}{
		{"Alone", true, false, true},
		{"NotAlone", false, false, false},
		{"AloneButCached", true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, w := range []Wire{NewEncoder(opts, nil), NewCopyEncoder(opts, CopyText), NewCopyEncoder(opts, CopyBinary)} {
				var held int64
				solo := &Solo{Alone: func() bool { return tc.alone }, Hold: func(n int64) { held += n }}
				g := WithSolo(Shared(slices.Clone(all[1:])), solo)
				if tc.cached {
					var b []byte
					Runs(w, g, &b)
				}
				rows := slices.Concat(g[:2], []Row{progress}, g[2:])
				var b1 []byte
				want := bytes.Join(Runs(w, slices.Concat(all[1:3], []Row{progress}, all[3:]), &b1), nil)
				var rb RunBuffer
				runs := StreamRuns(w, rows, &rb)
				if got := bytes.Join(runs, nil); !bytes.Equal(got, want) {
					t.Fatalf("wire %q: StreamRuns joined\n got %q\nwant %q", w.Key(), got, want)
				}
				e := g[0].group
				cached := e.entries.Load() != nil
				if cached == tc.own {
					t.Errorf("wire %q: the group's cache has an encoding: %v, want %v", w.Key(), cached, !tc.own)
				}
				if got, want := held, int64(cap(rb.b)); tc.own && got != want {
					t.Errorf("wire %q: %d bytes held, want the buffer's %d", w.Key(), got, want)
				}
				if !tc.own && held != 0 {
					t.Errorf("wire %q: %d bytes held for cached runs, want 0", w.Key(), held)
				}
				rb.Release()
				if held != 0 {
					t.Errorf("wire %q: %d bytes held after Release, want 0", w.Key(), held)
				}
			}
		})
	}
}

// TestRunBufferReleasesLargeBuffers: a RunBuffer keeps a small buffer
// across Release, and gives a piece's (large) one back to the pool.
func TestRunBufferReleasesLargeBuffers(t *testing.T) {
	// (grow takes any pooled buffer large enough: a small one is made
	// here.)
	rb := RunBuffer{b: make([]byte, 10, 100)}
	rb.Release()
	if cap(rb.b) != 100 {
		t.Errorf("a 100-byte buffer was let go of")
	}
	rb.grow(keepRunBytes + 1)
	rb.Release()
	if rb.b != nil {
		t.Errorf("a %d-byte buffer was kept after Release", cap(rb.b))
	}
}

// TestSnapshotRowsEncodeAsData: rows of SnapshotRows, which read their
// update in place, and of SnapshotColumns, which read their row of a
// part's columns in place, encode to the bytes of the same rows built by
// Data, in every wire format, with and without PROGRESS, and show the
// same columns and size.
func TestSnapshotRowsEncodeAsData(t *testing.T) {
	full := allTypesRows()[1].Tail[1:]
	updates := []row.Update{
		{Row: make(row.Row, len(full)), T: 7, Diff: 3},
		{Row: full, T: 7, Diff: 1},
		{Row: slices.Clone(full), T: 7, Diff: -2},
	}
	updates[2].Row[7] = "a\\b\tc"               // escapes in text and csv
	slices.SortFunc(updates, row.CompareUpdate) // a chunk is in row order
	cols := partColumns(t, allTypes, updates)
	for _, progress := range []bool{false, true} {
		for _, columns := range []bool{false, true} {
			opts := &Options{Relation: allTypes, Progress: progress}
			lazy := opts.SnapshotRows(7, updates)
			if columns {
				lazy = opts.SnapshotColumns(cols, func() []row.Update { return codec.DecodeColumns(cols) }, nil)
			}
			checkSameRows(t, fmt.Sprintf("progress %v, columns %v", progress, columns), opts, lazy, Shared(opts.Data(7, updates)))
		}
	}
}

// partColumns encodes updates (consolidated, all at one time) as a part
// and reads them back as columns, as a snapshot cursor passes them
// through.
func partColumns(t *testing.T, s row.Schema, updates []row.Update) *row.Columns {
	t.Helper()
	data, _, err := codec.EncodePart(s, updates)
	if err != nil {
		t.Fatal(err)
	}
	r, err := codec.NewPartReader(s, data)
	if err != nil {
		t.Fatal(err)
	}
	cols, err := r.NextColumns()
	if err != nil {
		t.Fatal(err)
	}
	if cols.Len != len(updates) {
		t.Fatalf("a batch of %d rows, want all %d", cols.Len, len(updates))
	}
	return cols
}

// checkSameRows checks that lazy and eager hold the same rows: the same
// columns and sizes, and the same bytes in every wire format.
func checkSameRows(t *testing.T, name string, opts *Options, lazy, eager []Row) {
	t.Helper()
	if len(lazy) != len(eager) {
		t.Fatalf("%s: got %d rows, want %d", name, len(lazy), len(eager))
	}
	wires := []Wire{NewEncoder(opts, nil), NewEncoder(opts, []int16{1}), NewEncoder(opts, mixedFormats(opts)),
		NewCopyEncoder(opts, CopyText), NewCopyEncoder(opts, CopyCSV), NewCopyEncoder(opts, CopyBinary),
		NewCopyEncoderOptions(opts, CopyText, pgrepr.TextOptions{Delimiter: '|', Null: "nil"}, pgrepr.DefaultCSVOptions())}
	// Encoded before anything reads the rows' datums (which decodes rows
	// of columns), and after.
	for pass := range 2 {
		for _, w := range wires {
			var b1, b2 []byte
			got := bytes.Join(Runs(w, lazy, &b1), nil)
			want := bytes.Join(Runs(w, eager, &b2), nil)
			if !bytes.Equal(got, want) {
				t.Errorf("%s, pass %d, wire %q:\n got %q\nwant %q", name, pass, w.Key(), got, want)
			}
		}
		for i := range lazy {
			if got, want := fmt.Sprint(lazy[i].Columns()), fmt.Sprint(eager[i].Tail); got != want {
				t.Errorf("%s: row %d columns %s, want %s", name, i, got, want)
			}
			for c := range len(eager[i].Tail) + 1 {
				if got, want := fmt.Sprint(lazy[i].Column(c)), fmt.Sprint(eager[i].Column(c)); got != want {
					t.Errorf("%s: row %d column %d = %s, want %s", name, i, c, got, want)
				}
			}
			if got, want := lazy[i].Size(), eager[i].Size(); got != want {
				t.Errorf("%s: row %d size %d, want %d", name, i, got, want)
			}
		}
	}
}

// mixedFormats returns result formats for opts's columns alternating
// between text and binary.
func mixedFormats(opts *Options) []int16 {
	f := make([]int16, len(opts.Columns()))
	for i := range f {
		f[i] = int16(i % 2)
	}
	return f
}
