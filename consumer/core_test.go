package consumer

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// stream parses a recorded stream, one row a line:
//
//	p T            progress row at T
//	d T DIFF V...  plain row (mz_diff)
//	s T STATE V... envelope row (mz_state)
//
// Every data row has Size 1 unless it ends in "#N" (size N).
func stream(t *testing.T, text string) []Row {
	t.Helper()
	var rows []Row
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			t.Fatalf("bad line %q", line)
		}
		ts, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			t.Fatalf("bad line %q: %v", line, err)
		}
		r := Row{Timestamp: ts, Size: 1}
		switch f[0] {
		case "p":
			r.Progressed, r.Size = true, 0
		case "d":
			r.Diff, err = strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				t.Fatalf("bad line %q: %v", line, err)
			}
		case "s":
			r.State = f[2]
		default:
			t.Fatalf("bad line %q", line)
		}
		if !r.Progressed {
			for _, v := range f[3:] {
				if n, ok := strings.CutPrefix(v, "#"); ok {
					r.Size, _ = strconv.Atoi(n)
					continue
				}
				if v == "NULL" {
					r.Values = append(r.Values, nil)
					continue
				}
				r.Values = append(r.Values, v)
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// show renders batches compactly: [lower,upper) P? S? then the updates.
func show(bs []Batch) string {
	var b strings.Builder
	for _, x := range bs {
		fmt.Fprintf(&b, "[%d,%d)", x.Lower, x.Upper)
		if x.Partial {
			b.WriteString(" partial")
		}
		if x.Snapshot {
			b.WriteString(" snapshot")
		}
		for _, u := range x.Updates {
			if u.State != "" {
				fmt.Fprintf(&b, " %d:%s%v", u.Timestamp, u.State, u.Values)
			} else {
				fmt.Fprintf(&b, " %d:%+d%v", u.Timestamp, u.Diff, u.Values)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// feed pushes rows one per millisecond from t0 and collects the batches.
func feed(t *testing.T, c *Core, rows []Row) []Batch {
	t.Helper()
	var out []Batch
	now := time.Unix(0, 0)
	for _, r := range rows {
		if err := c.Push(r, now); err != nil {
			t.Fatalf("Push(%+v): %v", r, err)
		}
		for b, ok := c.Next(); ok; b, ok = c.Next() {
			out = append(out, b)
		}
		now = now.Add(time.Millisecond)
	}
	return out
}

func TestCoreBatches(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  CoreConfig
		from Frontier
		in   string
		want string
	}{{
		name: "PlainSnapshotThenUpdates",
		in: `p 10
d 10 1 a
d 10 2 b
p 11
d 12 -1 a
d 12 1 c
p 13
p 15`,
		want: `[10,11) snapshot 10:+1[a] 10:+2[b]
[11,13) 12:-1[a] 12:+1[c]
[13,15)
`,
	}, {
		name: "EmptySnapshot",
		in: `p 10
p 11`,
		want: "[10,11) snapshot\n",
	}, {
		name: "Upsert",
		in: `p 5
s 5 upsert k1 v1
p 6
s 7 upsert k1 v2
s 7 delete k2 NULL
s 7 key_violation k3 NULL
p 8`,
		want: `[5,6) snapshot 5:upsert[k1 v1]
[6,8) 7:upsert[k1 v2] 7:delete[k2 <nil>] 7:key_violation[k3 <nil>]
`,
	}, {
		name: "Debezium",
		in: `p 5
s 5 insert k NULL v1
p 6
s 9 upsert k v1 v2
p 10`,
		want: `[5,6) snapshot 5:insert[k <nil> v1]
[6,10) 9:upsert[k v1 v2]
`,
	}, {
		name: "DelayGroupsTimestamps",
		cfg:  CoreConfig{MaxBatchDelay: 3 * time.Millisecond},
		in: `p 10
d 10 1 a
p 11
d 11 1 b
p 12
d 12 1 c
p 13
d 13 1 d
p 14`,
		// The batch opens at the first progress (ms 2) and closes at
		// the first progress at least 3 ms later (ms 6).
		want: `[10,13) snapshot 10:+1[a] 11:+1[b] 12:+1[c]
`,
	}, {
		name: "BytesCloseBatch",
		cfg:  CoreConfig{MaxBatchBytes: 2, MaxBatchDelay: time.Hour},
		in: `p 10
d 10 1 a
p 11
d 11 1 b
p 12
d 12 1 c
p 13`,
		want: `[10,12) snapshot 10:+1[a] 11:+1[b]
`,
	}, {
		name: "LargeTimestampInPartials",
		cfg:  CoreConfig{MaxBatchBytes: 2},
		in: `p 10
d 10 1 a
d 10 1 b
d 10 1 c
d 10 1 d
d 10 1 e
p 11
d 11 1 f
p 12`,
		want: `[10,10) partial snapshot 10:+1[a] 10:+1[b]
[10,10) partial snapshot 10:+1[c] 10:+1[d]
[10,11) snapshot 10:+1[e]
[11,12) 11:+1[f]
`,
	}, {
		name: "PartialAfterClosedTimestamps",
		cfg:  CoreConfig{MaxBatchBytes: 2, MaxBatchDelay: time.Hour},
		in: `p 10
d 10 1 a
p 11
d 12 1 b
d 12 1 c
d 12 1 d
p 13`,
		// 10 is closed (and under the limit) when 12 overflows: it
		// goes out whole first; the final chunk closes with nothing
		// left since the last cut.
		want: `[10,12) snapshot 10:+1[a]
[12,12) partial 12:+1[b] 12:+1[c]
`,
	}, {
		name: "ResumeDropsRowsBelowFrontier",
		from: 20,
		in: `p 19
d 19 1 old
d 20 1 a
p 21`,
		want: "[20,21) 20:+1[a]\n",
	}, {
		name: "LaterTimestampClosesOpenOne",
		in: `p 10
d 10 1 a
d 11 1 b
p 12`,
		want: "[10,11) snapshot 10:+1[a]\n[11,12) 11:+1[b]\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCore(tc.cfg, tc.from)
			got := show(feed(t, c, stream(t, tc.in)))
			if got != tc.want {
				t.Errorf("batches:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// TestCorePartialFinalChunkOnTick: a partial timestamp whose last rows went
// out in a chunk is closed by a batch of its own when progress arrives, even
// with a long delay... once the delay passes.
func TestCorePartialFinalChunkOnTick(t *testing.T) {
	c := NewCore(CoreConfig{MaxBatchBytes: 2, MaxBatchDelay: time.Second}, 0)
	got := feed(t, c, stream(t, "p 10\nd 10 1 a\nd 10 1 b\np 11"))
	c.Tick(time.Unix(5, 0))
	for b, ok := c.Next(); ok; b, ok = c.Next() {
		got = append(got, b)
	}
	want := "[10,10) partial snapshot 10:+1[a] 10:+1[b]\n[10,11) snapshot\n"
	if s := show(got); s != want {
		t.Errorf("batches:\n%s\nwant:\n%s", s, want)
	}
}

func TestCoreErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		from Frontier
		in   string
		want error
	}{
		{"NoOpeningProgress", 0, "d 10 1 a", ErrNoOpeningProgress},
		{"OpeningNotAtAsOf", 20, "p 20", ErrUnexpectedOpening},
		{"DataBelowFrontier", 0, "p 10\np 12\nd 11 1 a", ErrOutOfOrder},
		{"ProgressBackwards", 0, "p 10\np 12\np 11", ErrOutOfOrder},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCore(CoreConfig{}, tc.from)
			var err error
			for _, r := range stream(t, tc.in) {
				if err = c.Push(r, time.Unix(0, 0)); err != nil {
					break
				}
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestStatement(t *testing.T) {
	for _, tc := range []struct {
		src  Source
		from Frontier
		want string
	}{
		{Source{Name: "orders"}, 0, "SUBSCRIBE orders WITH (PROGRESS)"},
		{Source{Name: "orders"}, 101, "SUBSCRIBE orders WITH (PROGRESS, SNAPSHOT = false) AS OF 100"},
		{Source{Name: "orders", ID: "u7", Envelope: "ENVELOPE UPSERT (KEY (id))"}, 1,
			"SUBSCRIBE [u7 AS orders] ENVELOPE UPSERT (KEY (id)) WITH (PROGRESS, SNAPSHOT = false) AS OF 0"},
	} {
		if got := tc.src.Statement(tc.from); got != tc.want {
			t.Errorf("Statement(%d) = %q, want %q", tc.from, got, tc.want)
		}
	}
}

// TestCoreModel drives the core with random streams and configurations and
// checks the batch invariants against the input: batches are contiguous,
// never split a timestamp except as partial runs that end in a closed batch,
// carry exactly the input's data rows in order, and each batch's rows lie
// in [Lower, Upper).
func TestCoreModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 2000 {
		cfg := CoreConfig{MaxBatchBytes: rng.IntN(6), MaxBatchDelay: time.Duration(rng.IntN(5)) * time.Millisecond}
		var from Frontier
		ts := uint64(10 + rng.IntN(5))
		if rng.IntN(2) == 0 {
			from = Frontier(ts + 1)
		}
		rows := []Row{{Timestamp: ts, Progressed: true}}
		var want []Update
		n := 0
		for range rng.IntN(40) {
			switch rng.IntN(4) {
			case 0:
				ts += uint64(1 + rng.IntN(3))
				rows = append(rows, Row{Timestamp: ts, Progressed: true})
			default:
				if from != 0 && ts < uint64(from) {
					ts = uint64(from)
				}
				n++
				r := Row{Timestamp: ts, Diff: 1, Values: []any{n}, Size: 1 + rng.IntN(3)}
				rows = append(rows, r)
				want = append(want, Update{Timestamp: r.Timestamp, Diff: 1, Values: r.Values, Size: r.Size})
			}
		}
		ts++
		rows = append(rows, Row{Timestamp: ts, Progressed: true})

		c := NewCore(cfg, from)
		got := feed(t, c, rows)
		c.Tick(time.Unix(1000, 0))
		for b, ok := c.Next(); ok; b, ok = c.Next() {
			got = append(got, b)
		}
		var all []Update
		lower := from
		if from == 0 {
			lower = Frontier(rows[0].Timestamp)
		}
		inPartial := false
		for _, b := range got {
			if b.Lower != lower {
				t.Fatalf("iter %d: batch lower %d, want %d\n%s", iter, b.Lower, lower, show(got))
			}
			if b.Partial {
				if b.Upper != b.Lower {
					t.Fatalf("iter %d: partial with upper %d != lower %d", iter, b.Upper, b.Lower)
				}
				for _, u := range b.Updates {
					if Frontier(u.Timestamp) != b.Lower {
						t.Fatalf("iter %d: partial of %d holds a row at %d", iter, b.Lower, u.Timestamp)
					}
				}
			} else {
				if b.Upper <= b.Lower {
					t.Fatalf("iter %d: closed batch [%d,%d)", iter, b.Lower, b.Upper)
				}
				for _, u := range b.Updates {
					if Frontier(u.Timestamp) < b.Lower || Frontier(u.Timestamp) >= b.Upper {
						t.Fatalf("iter %d: row at %d in batch [%d,%d)", iter, u.Timestamp, b.Lower, b.Upper)
					}
				}
			}
			inPartial = b.Partial
			lower = b.Upper
			all = append(all, b.Updates...)
		}
		if inPartial {
			t.Fatalf("iter %d: stream ended in a partial run", iter)
		}
		if lower != Frontier(ts) {
			t.Fatalf("iter %d: last upper %d, want %d\n%s", iter, lower, ts, show(got))
		}
		if len(all) != len(want) || (len(want) > 0 && !reflect.DeepEqual(all, want)) {
			t.Fatalf("iter %d: updates\n%v\nwant\n%v", iter, all, want)
		}
	}
}

// TestMerger: two collections' streams, interleaved as they might arrive,
// come out as batches at the least frontier: nothing of a timestamp is
// delivered before every collection is past it.
func TestMerger(t *testing.T) {
	m := NewMerger(CoreConfig{}, 0, 2)
	a := stream(t, "p 10\nd 10 1 a1\np 11\nd 12 1 a2\np 13\nd 14 1 a3\np 15")
	b := stream(t, "p 10\nd 10 1 b1\np 12\nd 12 1 b2\np 15")
	var got []Batch
	now := time.Unix(0, 0)
	push := func(i int, r Row) {
		t.Helper()
		if err := m.Push(i, r, now); err != nil {
			t.Fatal(err)
		}
		for x, ok := m.Next(); ok; x, ok = m.Next() {
			got = append(got, x)
		}
	}
	for _, r := range a[:5] { // a up to progress 13
		push(0, r)
	}
	if len(got) != 0 {
		t.Fatalf("batches before collection 1 opened: %s", show(got))
	}
	for _, r := range b[:3] { // b up to progress 12
		push(1, r)
	}
	for _, r := range a[5:] {
		push(0, r)
	}
	for _, r := range b[3:] {
		push(1, r)
	}
	// a's row at 14 closed a's 13 before b reached 15: the cut at 14.
	want := `[10,12) snapshot 10:+1[a1] 10:+1[b1]
[12,14) 12:+1[a2] 12:+1[b2]
[14,15) 14:+1[a3]
`
	if s := show(got); s != want {
		t.Errorf("batches:\n%s\nwant:\n%s", s, want)
	}
	var colls []int
	for _, x := range got {
		for _, u := range x.Updates {
			colls = append(colls, u.Collection)
		}
	}
	if !reflect.DeepEqual(colls, []int{0, 1, 0, 1, 0}) {
		t.Errorf("collections %v, want [0 1 0 1 0]", colls)
	}
}

func TestMergerOpeningsDiffer(t *testing.T) {
	m := NewMerger(CoreConfig{}, 0, 2)
	if err := m.Push(0, Row{Timestamp: 10, Progressed: true}, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	if err := m.Push(1, Row{Timestamp: 11, Progressed: true}, time.Unix(0, 0)); !errors.Is(err, ErrUnexpectedOpening) {
		t.Fatalf("err = %v, want ErrUnexpectedOpening", err)
	}
}
