package conformance

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

func TestParseRewriteRoundTrip(t *testing.T) {
	text := `# known-failure
# tick: 20ms

# a comment
exec conn=a retry=1s
SELECT 1;
SELECT 2
----
SELECT 1

query sort
SELECT 'x'
----
----
a

b
----
----

now
t
----
`
	s, err := Parse("x.txt", text)
	if err != nil {
		t.Fatal(err)
	}
	if !s.KnownFailure || s.Header["tick"] != "20ms" || len(s.Cases) != 3 {
		t.Fatalf("got known-failure %v, header %v, %d cases", s.KnownFailure, s.Header, len(s.Cases))
	}
	c := s.Cases[0]
	if v, _ := c.Arg("retry"); c.Cmd != "exec" || v != "1s" || c.Input != "SELECT 1;\nSELECT 2" || c.Expected != "SELECT 1" {
		t.Errorf("case 0: %+v", c)
	}
	if got := s.Cases[1].Expected; got != "a\n\nb" {
		t.Errorf("case 1 expected %q, want %q", got, "a\n\nb")
	}
	if got := s.Rewrite(nil); got != text {
		t.Errorf("rewrite changed the script:\n%s", got)
	}
}

// FuzzParse checks that the script parser never panics and that a
// rewrite of what it parsed parses to the same cases.
func FuzzParse(f *testing.F) {
	f.Add("exec\nCREATE TABLE t (a int)\n----\nCREATE TABLE\n")
	f.Add("# tick: 1s\n\nquery sort\nSELECT 1\n----\n----\n1\n\n2\n----\n----\n")
	f.Add("fetch conn=r\nFETCH c\n----\n")
	f.Fuzz(func(t *testing.T, text string) {
		s, err := Parse("fuzz", text)
		if err != nil {
			return
		}
		for _, c := range s.Cases {
			if strings.Contains(c.Expected, "----\n----") || strings.HasSuffix(c.Expected, "\n----") {
				return // not representable in the long form either
			}
		}
		again, err := Parse("fuzz", s.Rewrite(nil))
		if err != nil {
			t.Fatalf("rewrite does not parse: %v", err)
		}
		if len(again.Cases) != len(s.Cases) {
			t.Fatalf("rewrite has %d cases, want %d", len(again.Cases), len(s.Cases))
		}
		for i, c := range s.Cases {
			if d := again.Cases[i]; d.Directive != c.Directive || d.Expected != c.Expected {
				t.Fatalf("case %d: %q/%q after rewrite, want %q/%q", i, d.Directive, d.Expected, c.Directive, c.Expected)
			}
		}
	})
}

// FuzzBinaryCopy checks that the PGCOPY decoder never panics.
func FuzzBinaryCopy(f *testing.F) {
	header := append(append([]byte{}, pgcopySignature...), 0, 0, 0, 0, 0, 0, 0, 0)
	tuple := binary.BigEndian.AppendUint16(nil, 2)
	tuple = binary.BigEndian.AppendUint32(tuple, 1)
	tuple = append(tuple, 'x')
	tuple = binary.BigEndian.AppendUint32(tuple, 0xffffffff)
	f.Add(append(append([]byte{}, header...), tuple...), []byte{0xff, 0xff})
	f.Add([]byte("PGCOPY"), []byte{})
	f.Fuzz(func(t *testing.T, first, second []byte) {
		var r binaryCopyReader
		if _, _, _, err := r.next(first); err != nil {
			return
		}
		_, _, _, _ = r.next(second)
	})
}

func TestBinaryCopyReader(t *testing.T) {
	header := append(append([]byte{}, pgcopySignature...), 0, 0, 0, 0, 0, 0, 0, 0)
	tuple := binary.BigEndian.AppendUint16(nil, 2)
	tuple = binary.BigEndian.AppendUint32(tuple, 1)
	tuple = append(tuple, 'x')
	tuple = binary.BigEndian.AppendUint32(tuple, 0xffffffff)
	var r binaryCopyReader
	h, tuples, trailer, err := r.next(append(header, tuple...))
	if err != nil || !h || trailer || len(tuples) != 1 || string(tuples[0][0]) != "x" || tuples[0][1] != nil {
		t.Fatalf("first: header %v, tuples %q, trailer %v, err %v", h, tuples, trailer, err)
	}
	h, tuples, trailer, err = r.next([]byte{0xff, 0xff})
	if err != nil || h || !trailer || len(tuples) != 0 {
		t.Fatalf("trailer: header %v, tuples %q, trailer %v, err %v", h, tuples, trailer, err)
	}
	if _, _, _, err := r.next(tuple); err == nil {
		t.Fatal("data after the trailer: no error")
	}
}

func TestTimestamps(t *testing.T) {
	ts := newTimestamps()
	const base = 1700000000000
	line := func(s string) string {
		t.Helper()
		got, err := ts.replace(s)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := line("1700000000000 t 5 1700000000001"); got != "<T0> t 5 <T0+1>" {
		t.Errorf("got %q", got)
	}
	if got := line("1700000000010 1700000000009 1700000000000"); got != "<T1> <T1-1> <T0>" {
		t.Errorf("got %q", got)
	}
	if got := line("AS OF 1 and 170000000000"); got != "AS OF 1 and 170000000000" {
		t.Errorf("short numbers changed: %q", got)
	}
	if _, err := ts.replace("1700000000005"); err == nil || !strings.Contains(err.Error(), "numeric order") {
		t.Errorf("a new value below <T1>: err %v", err)
	}
	if v, err := ts.value("T1+100"); err != nil || v != base+110 {
		t.Errorf("T1+100 = %d, %v", v, err)
	}
	if got := line("1700000000110"); got != "<T1+100>" {
		t.Errorf("a value named in SQL prints by that name: %q", got)
	}
	if _, err := ts.value("T9"); err == nil {
		t.Error("an unknown placeholder: no error")
	}
	if got := ts.replaceKnown("1700000000010 1700000000011 1700000000999"); got != "<T1> <T?> <T?>" {
		t.Errorf("replaceKnown: %q", got)
	}
}

// TestRowTimestamps: subscribe rows name their mz_timestamp by what the
// row is, so that ticks 1 ms apart print as they do 20 ms apart.
func TestRowTimestamps(t *testing.T) {
	for _, gap := range []uint64{1, 2, 20} {
		t.Run(fmt.Sprintf("Gap%d", gap), func(t *testing.T) {
			const t3 = 1700000000000
			t4, t5 := t3+gap, t3+2*gap
			var o output
			o.ts = newTimestamps()
			row := func(ts uint64, progress bool, rest string) {
				s := strconv.FormatUint(ts, 10)
				o.rows = append(o.rows, rowLine{key: s + "/" + strconv.FormatBool(progress), text: s + rest, ts: s, progress: progress})
				o.flush()
			}
			// The rows of SUBSCRIBE cnt WITH (PROGRESS): each value at its
			// time, then the progress row at that time + 1.
			row(t3, false, " f 1 1")
			row(t3+1, true, " t NULL")
			row(t4, false, " f 1 2")
			row(t4+1, true, " t NULL")
			row(t5, false, " f 1 3")
			want := "<T0> f 1 1\n<T0+1> t NULL\n<T1> f 1 2\n<T1+1> t NULL\n<T2> f 1 3"
			if got := o.String(); got != want {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
	// In tick scripts every new value is a placeholder of its own.
	ts := newTimestamps()
	ts.noOffsets = true
	for i, v := range []uint64{1700000000000, 1700000000001} {
		if n, err := ts.rowName(v, true); err != nil || n != fmt.Sprintf("T%d", i) {
			t.Errorf("tick script, progress row at %d: %q, %v", v, n, err)
		}
	}
}
