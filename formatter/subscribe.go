package formatter

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/shardtail/shardtail/row"
)

// Envelope is a SUBSCRIBE output envelope.
type Envelope int

// The envelopes.
const (
	EnvelopeNone Envelope = iota
	EnvelopeUpsert
	EnvelopeDebezium
)

// OrderItem is one WITHIN TIMESTAMP ORDER BY item over the output columns
// after mz_timestamp and mz_progressed (index 0 is mz_diff or mz_state).
// NullsFirst is the effective placement of NULLs, defaults resolved.
type OrderItem struct {
	Col        int
	Desc       bool
	NullsFirst bool
}

// Options describe one SUBSCRIBE's output shape. Two subscribes with equal
// Options produce byte-identical rows for the same updates, which is what
// lets the fast path encode once per shape.
type Options struct {
	// Relation is the schema of the subscribed relation.
	Relation row.Schema
	Progress bool
	Envelope Envelope
	// Keys are relation column indexes of ENVELOPE ... (KEY (...)), in KEY
	// order.
	Keys []int
	// Order is WITHIN TIMESTAMP ORDER BY; empty means the default order.
	Order []OrderItem
}

// Column is an output column.
type Column struct {
	Name     string
	Type     ColType
	Nullable bool
}

// ColType is an output column's type: a relation type or one of the
// SUBSCRIBE metadata types.
type ColType struct {
	// Rel is the relation type, valid when Meta is MetaNone.
	Rel row.Type
	// Mod is the relation column's type modifier, valid when Meta is
	// MetaNone; RowDescription reports it (Typmod).
	Mod  row.TypeMod
	Meta MetaType
}

// MetaType marks the SUBSCRIBE metadata columns' types.
type MetaType int

// Metadata column types.
const (
	MetaNone      MetaType = iota
	MetaTimestamp          // mz_timestamp: numeric
	MetaProgress           // mz_progressed: bool
	MetaDiff               // mz_diff: int8
	MetaState              // mz_state: text
)

// Columns returns the output columns in order.
func (o *Options) Columns() []Column {
	cols := []Column{{Name: "mz_timestamp", Type: ColType{Meta: MetaTimestamp}}}
	if o.Progress {
		cols = append(cols, Column{Name: "mz_progressed", Type: ColType{Meta: MetaProgress}})
	}
	rel := func(c row.Column, name string, nullable bool) Column {
		return Column{Name: name, Type: ColType{Rel: c.Type, Mod: c.Mod}, Nullable: nullable || c.Nullable || o.Progress}
	}
	switch o.Envelope {
	case EnvelopeNone:
		cols = append(cols, Column{Name: "mz_diff", Type: ColType{Meta: MetaDiff}, Nullable: o.Progress})
		for _, c := range o.Relation.Columns {
			cols = append(cols, rel(c, c.Name, false))
		}
	case EnvelopeUpsert, EnvelopeDebezium:
		cols = append(cols, Column{Name: "mz_state", Type: ColType{Meta: MetaState}, Nullable: o.Progress})
		for _, k := range o.Keys {
			c := o.Relation.Columns[k]
			cols = append(cols, rel(c, c.Name, false))
		}
		// UPSERT has the value columns once; DEBEZIUM before and after.
		prefixes := []string{""}
		if o.Envelope == EnvelopeDebezium {
			prefixes = []string{"before_", "after_"}
		}
		for _, prefix := range prefixes {
			for _, i := range o.values() {
				c := o.Relation.Columns[i]
				cols = append(cols, rel(c, prefix+c.Name, true))
			}
		}
	}
	return cols
}

// values returns the relation's non-key column indexes in relation order.
func (o *Options) values() []int {
	var out []int
	for i := range o.Relation.Columns {
		if !slices.Contains(o.Keys, i) {
			out = append(out, i)
		}
	}
	return out
}

// Row is one output row. Time is mz_timestamp; Progressed marks a progress
// row (Tail is then nil: every other column NULL). Tail holds the columns
// after mz_timestamp and mz_progressed: mz_diff (int64) or mz_state
// (string), then the relation columns. A data row of SnapshotRows has no
// Tail of its own: its columns are its update's (read them with Columns
// or Column; the encoders read them in place).
type Row struct {
	Time uint64
	Tail row.Row
	// group, when set, holds the wire encodings of the shared rows this row
	// belongs to (at index idx): rows shared by many subscribers (the fast
	// path) are encoded once per wire format.
	group *rowGroup
	// idx is an int32, after Tail and before Progressed, so that a Row is
	// 48 bytes rather than 56: a snapshot piece costs one per row.
	idx        int32
	Progressed bool
}

// Data turns the consolidated updates at one time into output rows in the
// subscribe's order. updates must all be at time t and consolidated.
func (o *Options) Data(t uint64, updates []row.Update) []Row {
	var out []Row
	switch o.Envelope {
	case EnvelopeNone:
		out = make([]Row, 0, len(updates))
		// One allocation holds every row's columns.
		width := 1 + len(o.Relation.Columns)
		slab := make([]row.Datum, 0, len(updates)*width)
		for _, u := range updates {
			start := len(slab)
			slab = append(slab, u.Diff)
			slab = append(slab, u.Row...)
			out = append(out, Row{Time: t, Tail: slab[start:len(slab):len(slab)]})
		}
	default:
		out = o.envelope(t, updates)
	}
	o.sort(out)
	return out
}

// SnapshotRows returns the data rows of one snapshot chunk at t (updates
// consolidated, all at t, in row order), marked Shared, for a shape whose
// chunks stream (StreamsSnapshotChunks, else it is Shared(Data(t,
// updates))). The chunk's row order is then the output order, so the rows
// are not sorted again, and each row refers to its update instead of
// holding a copy of its columns: a snapshot piece costs one Row per
// update, and its encodings read the updates in place. The caller must
// not modify updates afterwards.
func (o *Options) SnapshotRows(t uint64, updates []row.Update) []Row {
	return o.SnapshotRowsCharged(t, updates, nil)
}

// SnapshotRowsCharged is SnapshotRows, and calls charge (if not nil) with
// the bytes of each wire format's encoding of the rows when it is computed,
// as SharedCharged does: whoever retains the rows counts their encodings.
func (o *Options) SnapshotRowsCharged(t uint64, updates []row.Update, charge func(int64)) []Row {
	if !o.StreamsSnapshotChunks() {
		return SharedCharged(o.Data(t, updates), charge)
	}
	g := &rowGroup{updates: updates, rows: make([]Row, len(updates)), charge: charge}
	for i := range g.rows {
		g.rows[i] = Row{Time: t, group: g, idx: int32(i)}
	}
	return g.rows
}

// SnapshotColumns is SnapshotRowsCharged for a chunk held as columns
// (at cols.T, consolidated, in row order): each row refers to its row of
// the columns, and the wire encoders read the values there, without a
// datum per value. decode returns the chunk as updates (the same
// decoding every time): whatever reads a row's datums (CSV, Columns,
// Column) decodes the whole chunk once through it. For a shape whose
// chunks do not stream (StreamsSnapshotChunks) it is
// SnapshotRowsCharged(cols.T, decode(), charge).
func (o *Options) SnapshotColumns(cols *row.Columns, decode func() []row.Update, charge func(int64)) []Row {
	if !o.StreamsSnapshotChunks() {
		return o.SnapshotRowsCharged(cols.T, decode(), charge)
	}
	g := &rowGroup{cols: cols, decode: decode, rows: make([]Row, cols.Len), charge: charge}
	for i := range g.rows {
		g.rows[i] = Row{Time: cols.T, group: g, idx: int32(i)}
	}
	return g.rows
}

// update returns the update a row of SnapshotRows or SnapshotColumns
// stands for, or nil for a row that holds its Tail.
func (r Row) update() *row.Update {
	if r.Tail != nil || r.Progressed || r.group == nil {
		return nil
	}
	if r.group.cols != nil {
		return &r.group.decoded()[r.idx]
	}
	if r.group.updates != nil {
		return &r.group.updates[r.idx]
	}
	return nil
}

// columns returns the columns and the row of them that a row of
// SnapshotColumns stands for: ok false for any other row.
func (r Row) columns() (c *row.Columns, j int, ok bool) {
	if r.Tail != nil || r.Progressed || r.group == nil || r.group.cols == nil {
		return nil, 0, false
	}
	return r.group.cols, r.group.cols.Off + int(r.idx), true
}

// decoded returns the group's columns as updates, decoding them on the
// first call. Not under mu: an encoding, made under mu, may need them.
// Their memory is not charged again: the columns' charge (Columns.Size)
// already counts them as decoded.
func (g *rowGroup) decoded() []row.Update {
	g.decodeOnce.Do(func() { g.updates = g.decode() })
	return g.updates
}

// Columns returns the row's columns after mz_timestamp and mz_progressed,
// as Tail holds them: Tail itself, or for a row of SnapshotRows a new
// slice of mz_diff and the update's row.
func (r Row) Columns() row.Row {
	if u := r.update(); u != nil {
		return append(row.Row{u.Diff}, u.Row...)
	}
	return r.Tail
}

// Column returns column i of Columns without building it; nil past the
// end (a progress row's columns are all NULL).
func (r Row) Column(i int) row.Datum {
	if u := r.update(); u != nil {
		if i == 0 {
			return u.Diff
		}
		if i <= len(u.Row) {
			return u.Row[i-1]
		}
		return nil
	}
	if i < len(r.Tail) {
		return r.Tail[i]
	}
	return nil
}

// TimeRows are the output rows of the updates at one time.
type TimeRows struct {
	T    uint64
	Rows []Row
}

// Format turns consolidated updates ordered by time into output rows,
// grouped by time.
func (o *Options) Format(updates []row.Update) []TimeRows {
	var out []TimeRows
	for i := 0; i < len(updates); {
		t := updates[i].T
		j := i + 1
		for j < len(updates) && updates[j].T == t {
			j++
		}
		out = append(out, TimeRows{T: t, Rows: o.Data(t, updates[i:j])})
		i = j
	}
	return out
}

// ShapeKey identifies the output shape for caching: two Options with the
// same key format the same updates into the same rows.
func (o *Options) ShapeKey() string {
	return fmt.Sprintf("p%v e%d k%v o%v", o.Progress, o.Envelope, o.Keys, o.Order)
}

// ProgressRow returns the progress row at frontier.
func (o *Options) ProgressRow(frontier uint64) Row {
	return Row{Time: frontier, Progressed: true}
}

// envelope groups updates by key and applies the UPSERT / DEBEZIUM rules.
func (o *Options) envelope(t uint64, updates []row.Update) []Row {
	keyOf := func(r row.Row) row.Row {
		k := make(row.Row, len(o.Keys))
		for i, c := range o.Keys {
			k[i] = r[c]
		}
		return k
	}
	sorted := slices.Clone(updates)
	slices.SortStableFunc(sorted, func(a, b row.Update) int { return row.Compare(keyOf(a.Row), keyOf(b.Row)) })
	vals := o.values()
	var out []Row
	for i := 0; i < len(sorted); {
		key := keyOf(sorted[i].Row)
		j := i + 1
		for j < len(sorted) && row.Equal(keyOf(sorted[j].Row), key) {
			j++
		}
		group := sorted[i:j]
		i = j
		var ins, del *row.Update
		state := "key_violation"
		switch {
		case len(group) == 1 && group[0].Diff == 1:
			ins = &group[0]
			state = "upsert"
			if o.Envelope == EnvelopeDebezium {
				state = "insert"
			}
		case len(group) == 1 && group[0].Diff == -1:
			del = &group[0]
			state = "delete"
		case len(group) == 2 && group[0].Diff+group[1].Diff == 0 && (group[0].Diff == 1 || group[0].Diff == -1):
			ins, del = &group[0], &group[1]
			if ins.Diff == -1 {
				ins, del = del, ins
			}
			state = "upsert"
		}
		tail := row.Row{state}
		tail = append(tail, key...)
		pick := func(u *row.Update) {
			for _, c := range vals {
				if u == nil || state == "key_violation" {
					tail = append(tail, nil)
				} else {
					tail = append(tail, u.Row[c])
				}
			}
		}
		if o.Envelope == EnvelopeUpsert {
			pick(ins)
		} else {
			pick(del)
			pick(ins)
		}
		out = append(out, Row{Time: t, Tail: tail})
	}
	return out
}

// sort orders rows within one time: by the ORDER BY items, then by the
// relation columns and mz_diff/mz_state, so that output is deterministic.
func (o *Options) sort(rows []Row) {
	// A snapshot chunk or a time's updates arrive consolidated in row
	// order, which is already the default output order: checking costs
	// one comparison per row, sorting a dozen.
	if slices.IsSortedFunc(rows, o.compare) {
		return
	}
	slices.SortStableFunc(rows, o.compare)
}

// compare orders two rows of one time as sort does.
func (o *Options) compare(a, b Row) int {
	for _, it := range o.Order {
		x, y := a.Tail[it.Col], b.Tail[it.Col]
		if x == nil || y == nil {
			if x == nil && y == nil {
				continue
			}
			// NullsFirst is the effective placement: the planner sets
			// PostgreSQL's default (NULLS LAST for ASC, FIRST for DESC).
			if (x == nil) == it.NullsFirst {
				return -1
			}
			return 1
		}
		c := row.CompareSQL(x, y)
		if it.Desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	if c := row.Compare(a.Tail[1:], b.Tail[1:]); c != 0 {
		return c
	}
	return compareMeta(a.Tail[0], b.Tail[0])
}

func compareMeta(a, b row.Datum) int {
	switch x := a.(type) {
	case int64:
		return cmp.Compare(x, b.(int64))
	case string:
		return cmp.Compare(x, b.(string))
	}
	panic(fmt.Sprintf("formatter: metadata column of type %T", a))
}

// Size estimates the bytes a row occupies in a queue, for byte budgets.
func (r Row) Size() int64 {
	const overhead = 40 // Time, Progressed, the Tail slice header, the row group
	if c, j, ok := r.columns(); ok {
		const diff = 16 // mz_diff, as Tail would hold it
		return overhead + diff + c.RowSize(j)
	}
	if u := r.update(); u != nil {
		const diff = 16 // mz_diff, as Tail would hold it
		return overhead + diff + u.Row.Size()
	}
	return overhead + r.Tail.Size()
}
