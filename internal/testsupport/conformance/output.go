package conformance

import (
	"slices"
	"strconv"
	"strings"
)

// output collects a case's printed lines. Rows are buffered and flushed
// by groups of equal timestamp (and mz_progressed), each group sorted
// unless the subscribe is ordered, so that the order Materialize leaves
// unspecified does not matter; timestamps are replaced by placeholders as
// lines are printed, in order.
type output struct {
	ts      *timestamps // nil: print timestamps as they are
	lines   []string
	rows    []rowLine
	ordered bool
	sortAll bool
	// unnamed prints timestamps that are not placeholders yet as <T?>.
	unnamed bool
}

type rowLine struct {
	key  string // "" for rows that are not subscribe rows
	text string
	// ts is a subscribe row's mz_timestamp as text (text starts with
	// it), named by what the row is (timestamps.rowName); "" for other
	// rows.
	ts       string
	progress bool
}

func (o *output) add(line string) {
	o.flush()
	o.emit(line)
}

func (o *output) emit(line string) {
	if o.ts == nil {
		o.lines = append(o.lines, line)
		return
	}
	if o.unnamed {
		o.lines = append(o.lines, o.ts.replaceKnown(line))
		return
	}
	s, err := o.ts.replace(line)
	o.lines = append(o.lines, s)
	if err != nil {
		o.lines = append(o.lines, "!! "+err.Error())
	}
}

func (o *output) flush() {
	rows := o.rows
	o.rows = nil
	switch {
	case o.sortAll:
		slices.SortStableFunc(rows, func(a, b rowLine) int { return strings.Compare(a.text, b.text) })
	case !o.ordered:
		for i := 0; i < len(rows); {
			j := i + 1
			for j < len(rows) && rows[i].key != "" && rows[j].key == rows[i].key {
				j++
			}
			slices.SortStableFunc(rows[i:j], func(a, b rowLine) int { return strings.Compare(a.text, b.text) })
			i = j
		}
	}
	for _, r := range rows {
		o.emitRow(r)
	}
}

// emitRow prints a buffered row: a subscribe row's mz_timestamp named by
// what the row is (timestamps.rowName), the rest as emit does.
func (o *output) emitRow(r rowLine) {
	rest, ok := strings.CutPrefix(r.text, r.ts)
	if o.ts == nil || o.unnamed || r.ts == "" || !ok || !isTimestamp(r.ts) {
		o.emit(r.text)
		return
	}
	v, err := strconv.ParseUint(r.ts, 10, 64)
	if err != nil {
		o.emit(r.text)
		return
	}
	n, err := o.ts.rowName(v, r.progress)
	if err != nil {
		o.emit(r.text)
		return
	}
	o.emit("<" + n + ">" + rest)
}

func (o *output) String() string {
	o.flush()
	return strings.Join(o.lines, "\n")
}
