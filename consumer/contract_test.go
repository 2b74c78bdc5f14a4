package consumer_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/shardtail/shardtail/consumer"
	"github.com/shardtail/shardtail/consumer/contracttest"
	"github.com/shardtail/shardtail/row"
)

var updateContract = flag.Bool("update-contract", false, "rewrite testdata/contract.golden")

// contractGolden is the frozen rendering of the golden rows.
const contractGolden = "testdata/contract.golden"

// renderGolden renders every golden row as "name", its key under the
// namespace "orders:" and its value, one per line.
func renderGolden(t *testing.T) []byte {
	t.Helper()
	key, err := consumer.KeyColumns(contracttest.Columns, contracttest.Key)
	if err != nil {
		t.Fatalf("KeyColumns: %v", err)
	}
	schema := row.Schema{Columns: contracttest.Columns}
	var out bytes.Buffer
	for _, g := range contracttest.Rows() {
		if err := row.CheckRow(schema, g.Row); err != nil {
			t.Fatalf("golden row %s: %v", g.Name, err)
		}
		k := consumer.KeyJSON(nil, "orders:", contracttest.Columns, key, g.Row)
		v := consumer.ValueJSON(nil, contracttest.Columns, g.Row)
		if !json.Valid(k[len("orders:"):]) {
			t.Errorf("%s: key %s is not JSON after its prefix", g.Name, k)
		}
		if !json.Valid(v) {
			t.Errorf("%s: value %s is not JSON", g.Name, v)
		}
		fmt.Fprintf(&out, "# %s\n%s\n%s\n", g.Name, k, v)
	}
	return out.Bytes()
}

// TestContractGolden pins the key contract: the key and value of every
// golden row, byte for byte. A failure here means landed stores written by
// an earlier release can no longer be read by key: change the golden file
// (-update-contract) only with a release note.
func TestContractGolden(t *testing.T) {
	got := renderGolden(t)
	if *updateContract {
		if err := os.WriteFile(contractGolden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(contractGolden)
	if err != nil {
		t.Fatalf("%v (run with -update-contract to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the key contract changed:\ngot:\n%s\nwant (%s):\n%s", got, filepath.Base(contractGolden), want)
	}
}

// TestContractAgreesOnSharedColumns checks that a key cell and the same
// column's value cell are the same bytes: a reader may rebuild the key
// from a value it holds.
func TestContractAgreesOnSharedColumns(t *testing.T) {
	key, err := consumer.KeyColumns(contracttest.Columns, contracttest.Key)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range contracttest.Rows() {
		var cells []json.RawMessage
		if err := json.Unmarshal(consumer.KeyJSON(nil, "", contracttest.Columns, key, g.Row), &cells); err != nil {
			t.Fatalf("%s: %v", g.Name, err)
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(consumer.ValueJSON(nil, contracttest.Columns, g.Row), &obj); err != nil {
			t.Fatalf("%s: %v", g.Name, err)
		}
		if len(obj) != len(contracttest.Columns) {
			t.Errorf("%s: value has %d keys, want %d", g.Name, len(obj), len(contracttest.Columns))
		}
		for i, k := range key {
			name := contracttest.Columns[k].Name
			if got, want := string(cells[i]), string(obj[name]); got != want {
				t.Errorf("%s: key cell %d = %s, value[%q] = %s", g.Name, i, got, name, want)
			}
		}
	}
}

func TestKeyColumns(t *testing.T) {
	cols := contracttest.Columns
	got, err := consumer.KeyColumns(cols, []string{"placed", "customer"})
	if err != nil || fmt.Sprint(got) != "[2 1]" {
		t.Errorf("KeyColumns(placed, customer) = %v, %v; want [2 1], nil", got, err)
	}
	for _, names := range [][]string{nil, {"nope"}, {"id", "id"}} {
		if _, err := consumer.KeyColumns(cols, names); !errors.Is(err, consumer.ErrKeyColumn) {
			t.Errorf("KeyColumns(%q) = %v, want ErrKeyColumn", names, err)
		}
	}
}

// TestKeyJSONAppends checks that both functions append to buf rather than
// overwrite it (callers reuse one buffer per batch).
func TestKeyJSONAppends(t *testing.T) {
	cols := []row.Column{{Name: "a", Type: row.TypeInt4}}
	r := row.Row{int32(7)}
	if got, want := string(consumer.KeyJSON([]byte("x|"), "ns:", cols, []int{0}, r)), `x|ns:[7]`; got != want {
		t.Errorf("KeyJSON = %s, want %s", got, want)
	}
	if got, want := string(consumer.ValueJSON([]byte("x|"), cols, r)), `x|{"a":7}`; got != want {
		t.Errorf("ValueJSON = %s, want %s", got, want)
	}
}

// FuzzKeyJSON checks, for any text and bigint, that a key is the prefix and
// a valid JSON array whose cells decode back to the values (text exactly,
// bigint as its decimal string), and that the value is a valid JSON object
// with the same cells under their column names, whatever the names hold.
func FuzzKeyJSON(f *testing.F) {
	f.Add("acme", int64(1), "name")
	f.Add("Grüße \"\\\n\t\x01 😀", int64(-9007199254740993), "Größe \"x\"")
	f.Add("", int64(0), "")
	f.Fuzz(func(t *testing.T, s string, n int64, name string) {
		if !utf8.ValidString(s) || !utf8.ValidString(name) || name == "n" {
			t.Skip("text is valid UTF-8 (the server rejects anything else); names are distinct")
		}
		cols := []row.Column{{Name: name, Type: row.TypeText}, {Name: "n", Type: row.TypeInt8}}
		r := row.Row{s, n}
		key := consumer.KeyJSON(nil, "ns:", cols, []int{0, 1}, r)
		if !bytes.HasPrefix(key, []byte("ns:")) {
			t.Fatalf("key %q lacks its prefix", key)
		}
		var cells []string
		if err := json.Unmarshal(key[len("ns:"):], &cells); err != nil {
			t.Fatalf("key %q: %v", key, err)
		}
		if len(cells) != 2 || cells[0] != s || cells[1] != strconv.FormatInt(n, 10) {
			t.Fatalf("key %q decodes to %q, want [%q %q]", key, cells, s, strconv.FormatInt(n, 10))
		}
		var obj map[string]string
		if err := json.Unmarshal(consumer.ValueJSON(nil, cols, r), &obj); err != nil {
			t.Fatalf("value: %v", err)
		}
		if obj[name] != s || obj["n"] != cells[1] || len(obj) != 2 {
			t.Fatalf("value decodes to %q", obj)
		}
	})
}
