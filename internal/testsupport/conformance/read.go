package conformance

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
)

// readOpts say how to read and print one directive's messages.
type readOpts struct {
	rows     int  // stop after this many rows; -1: read to ReadyForQuery
	tags     bool // print command tags
	cols     bool // print RowDescription
	ordered  bool // do not sort rows within a timestamp
	sortAll  bool // sort all rows (query sort)
	dropRows bool // do not print rows (draining a canceled stream)
	params   bool // print ParameterStatus messages
	// skipProgress does not print progress rows (they are still checked).
	skipProgress bool
	// notices, when > 0, stops after this many notices: the statement
	// has started (a SUBSCRIBE's first message), so a cancel sent next
	// reaches it rather than racing its start.
	notices int
}

// read reads messages of wc's pending statement and prints them.
func (r *runner) read(ctx context.Context, wc *wireConn, st *stmtState, out *output, o readOpts) error {
	defer out.flush()
	out.sortAll = o.sortAll
	n, notices := 0, 0
	for (o.rows < 0 || n < o.rows) && (o.notices <= 0 || notices < o.notices) {
		ev, err := wc.receive(ctx)
		if err != nil {
			out.add("!! " + err.Error())
			return nil
		}
		info := st.cur()
		out.ordered = o.ordered || info.ordered
		switch {
		case ev.fields != nil:
			st.fields = ev.fields
			if o.cols {
				out.add("columns: " + describeFields(ev.fields))
			}
		case ev.isRow:
			n++
			vals := make([]string, len(ev.row))
			for i, v := range ev.row {
				var f *pgproto3.FieldDescription
				if i < len(st.fields) {
					f = &st.fields[i]
				}
				vals[i] = r.fieldText(f, v)
			}
			isSub := len(st.fields) > 0 && string(st.fields[0].Name) == "mz_timestamp"
			progressCol := len(st.fields) > 1 && string(st.fields[1].Name) == "mz_progressed"
			skip := o.dropRows || (o.skipProgress && progressCol && len(vals) > 1 && vals[1] == "t")
			r.addRow(out, info, vals, strings.Join(vals, " "), isSub, progressCol, skip)
		case ev.isTag:
			if st.copying && !st.copyDone {
				out.add("!! COPY completed without CopyDone")
			}
			if o.tags {
				out.add(ev.tag)
			}
			st.next()
		case ev.err != nil:
			out.add(errorLine(ev.err))
			for _, l := range extraLines(ev.err) {
				out.add(l)
			}
			st.next()
		case ev.notice != nil:
			e := pgproto3.ErrorResponse(*ev.notice)
			out.add(fmt.Sprintf("%s %s: %s", e.Severity, e.Code, e.Message))
			for _, l := range extraLines(&e) {
				out.add(l)
			}
			notices++
		case ev.copyOut != nil:
			st.copying = true
			format := "text"
			if ev.copyOut.OverallFormat == 1 {
				format = "binary"
				st.copyBin = &binaryCopyReader{}
			}
			line := fmt.Sprintf("copy-out: %s, %d columns", format, len(ev.copyOut.ColumnFormatCodes))
			for _, f := range ev.copyOut.ColumnFormatCodes {
				if f != uint16(ev.copyOut.OverallFormat) {
					line += fmt.Sprintf(" (column formats %v)", ev.copyOut.ColumnFormatCodes)
					break
				}
			}
			out.add(line)
		case ev.isCopy:
			n += r.copyData(out, st, info, ev.copyData, o.dropRows)
		case ev.copyDone:
			st.copyDone = true
		case ev.empty:
			out.add("empty query")
		case ev.param != "":
			if o.params {
				out.add("param " + ev.param)
			}
		case ev.ready:
			return nil
		}
	}
	return nil
}

// copyData prints one CopyData message and returns how many rows it held.
func (r *runner) copyData(out *output, st *stmtState, info stmtInfo, data []byte, drop bool) int {
	if st.copyBin != nil {
		header, tuples, trailer, err := st.copyBin.next(data)
		if header {
			out.add("PGCOPY header")
		}
		for _, tup := range tuples {
			vals := make([]string, len(tup))
			for i, v := range tup {
				var f *pgproto3.FieldDescription
				if i < len(st.copyOIDs) {
					f = &pgproto3.FieldDescription{DataTypeOID: st.copyOIDs[i], Format: 1}
				}
				vals[i] = r.fieldText(f, v)
			}
			r.addRow(out, info, vals, strings.Join(vals, " "), info.stream != nil, true, drop)
		}
		if len(tuples) > 1 {
			out.add(fmt.Sprintf("!! one CopyData held %d rows", len(tuples)))
		}
		if trailer {
			out.add("PGCOPY trailer")
		}
		if err != nil {
			out.add("!! " + err.Error())
		}
		return len(tuples)
	}
	line, ok := strings.CutSuffix(string(data), "\n")
	if !ok || strings.Contains(line, "\n") {
		out.add(fmt.Sprintf("!! CopyData is not one row: %q", data))
		return 1
	}
	sep := "\t"
	if info.csv {
		sep = ","
	}
	vals := strings.Split(line, sep)
	text := line
	if !info.csv {
		text = strings.Join(quoteEmpty(vals), " ")
	}
	r.addRow(out, info, vals, text, info.stream != nil, true, drop)
	return 1
}

func quoteEmpty(vals []string) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		if v == "" {
			v = `""`
		}
		out[i] = v
	}
	return out
}

// addRow checks a subscribe row against the stream's invariants and
// buffers it for printing. vals[0] is mz_timestamp when isSub; vals[1] is
// mz_progressed when it reads t or f and progressCol says it may be.
func (r *runner) addRow(out *output, info stmtInfo, vals []string, text string, isSub, progressCol, drop bool) {
	key, ts, progress := "", "", false
	if isSub && len(vals) > 0 {
		progress = progressCol && len(vals) > 1 && vals[1] == "t"
		key, ts = vals[0], vals[0]
		if progressCol && len(vals) > 1 && (vals[1] == "t" || vals[1] == "f") {
			key += "/" + vals[1]
		}
		if info.stream != nil {
			if v, err := strconv.ParseUint(vals[0], 10, 64); err == nil {
				if msg := info.stream.observe(v, progress); msg != "" {
					out.add("!! " + msg)
				}
			}
		}
	}
	if drop {
		return
	}
	out.rows = append(out.rows, rowLine{key: key, text: text, ts: ts, progress: progress})
}

// fieldText renders a value as text: NULL, "" for the empty string, and
// binary values decoded by type and re-encoded as Postgres text.
func (r *runner) fieldText(f *pgproto3.FieldDescription, v []byte) string {
	if v == nil {
		return "NULL"
	}
	if f == nil || f.Format == 0 {
		if len(v) == 0 {
			return `""`
		}
		return string(v)
	}
	t, ok := r.types.TypeForOID(f.DataTypeOID)
	if !ok {
		return fmt.Sprintf(`\x%x`, v)
	}
	val, err := t.Codec.DecodeValue(r.types, f.DataTypeOID, pgtype.BinaryFormatCode, v)
	if err != nil {
		return fmt.Sprintf("!!(binary %s: %v)", typeName(f.DataTypeOID), err)
	}
	txt, err := r.types.Encode(f.DataTypeOID, pgtype.TextFormatCode, val, nil)
	if err != nil {
		return fmt.Sprintf("!!(binary %s: %v)", typeName(f.DataTypeOID), err)
	}
	if len(txt) == 0 {
		return `""`
	}
	return string(txt)
}

func errorLine(e *pgproto3.ErrorResponse) string {
	s := fmt.Sprintf("error %s: %s", e.Code, e.Message)
	if e.Position > 0 {
		s += fmt.Sprintf(" (position %d)", e.Position)
	}
	return s
}

func extraLines(e *pgproto3.ErrorResponse) []string {
	var out []string
	if e.Detail != "" {
		out = append(out, "detail: "+e.Detail)
	}
	if e.Hint != "" {
		out = append(out, "hint: "+e.Hint)
	}
	return out
}

var typeNames = map[uint32]string{
	16: "bool", 17: "bytea", 20: "int8", 21: "int2", 23: "int4", 25: "text", 114: "json",
	700: "float4", 701: "float8", 1043: "varchar", 1082: "date", 1114: "timestamp",
	1184: "timestamptz", 1186: "interval", 1700: "numeric", 2950: "uuid", 3802: "jsonb",
}

func typeName(oid uint32) string {
	if n, ok := typeNames[oid]; ok {
		return n
	}
	return strconv.FormatUint(uint64(oid), 10)
}

// describeFields renders a RowDescription: name:type per column, with
// ":binary" for binary columns.
func describeFields(fs []pgproto3.FieldDescription) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = string(f.Name) + ":" + typeName(f.DataTypeOID)
		if f.Format == 1 {
			parts[i] += ":binary"
		}
	}
	return strings.Join(parts, " ")
}

// streamCheck checks the ordering invariants of one subscribe's rows,
// across the FETCHes of a cursor: timestamps never decrease, progress
// strictly advances, and no row is below a progress row already seen.
type streamCheck struct {
	last, progress uint64
	seen, progSeen bool
}

func (s *streamCheck) observe(ts uint64, progress bool) string {
	defer func() { s.last, s.seen = max(s.last, ts), true }()
	switch {
	case s.seen && ts < s.last:
		return fmt.Sprintf("timestamp went backwards: %d after %d", ts, s.last)
	case progress && s.progSeen && ts <= s.progress:
		return fmt.Sprintf("progress did not advance: %d after %d", ts, s.progress)
	case !progress && s.progSeen && ts < s.progress:
		return fmt.Sprintf("row at %d below the progress frontier %d", ts, s.progress)
	}
	if progress {
		s.progress, s.progSeen = ts, true
	}
	return ""
}
