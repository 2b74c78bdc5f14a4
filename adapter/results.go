package adapter

import (
	"context"
	"fmt"
	"io"

	"github.com/shardtail/shardtail/formatter"
	"github.com/shardtail/shardtail/pgrepr"
	"github.com/shardtail/shardtail/pgwire"
	"github.com/shardtail/shardtail/row"
)

// cmdResult is a result with only a command tag (and maybe notices and
// parameter statuses).
type cmdResult struct {
	tag  string
	msgs [][]byte
	sent bool
}

func command(tag string, msgs ...[]byte) *cmdResult { return &cmdResult{tag: tag, msgs: msgs} }

func (r *cmdResult) Describe() pgwire.Description {
	return pgwire.Description{Kind: pgwire.ResultCommand}
}
func (r *cmdResult) Next(ctx context.Context) ([][]byte, error) {
	if r.sent || len(r.msgs) == 0 {
		return nil, io.EOF
	}
	r.sent = true
	return r.msgs, nil
}
func (r *cmdResult) Tag() string { return r.tag }
func (r *cmdResult) Close()      {}

// rowSource produces rows for a rowsResult, a batch at a time; io.EOF ends.
type rowSource func(ctx context.Context) ([]row.Row, error)

// rowsResult streams relation rows (SELECT, SHOW) as DataRows.
type rowsResult struct {
	fields  []pgwire.Field
	types   []row.Type
	formats []pgrepr.Format
	next    rowSource
	pre     [][]byte // messages before the first row (notices)
	n       int
	tagVerb string
	close   func()
	buf     []byte
	// limit is max_result_size: a result past it fails with 53200.
	limit int64
	size  int64
}

// withLimit sets the result's size limit (max_result_size).
func (r *rowsResult) withLimit(n int64) *rowsResult {
	r.limit = n
	return r
}

// errResultTooLarge is max_result_size's error.
func errResultTooLarge(limit int64) error {
	return errorf(codeOutOfMemory, "result exceeds max size of %s", formatBytes(limit))
}

// errMemoryBudget is a subscribe whose single timestamp, held back whole
// to order or envelope it, outgrew the process's memory budget: nothing
// could be shed to make room, so it fails rather than the process.
func errMemoryBudget(limit int64) error {
	return errorf(codeOutOfMemory, "SUBSCRIBE timestamp exceeds the server's memory budget of %s (--memory-budget)", formatBytes(limit))
}

// formatBytes renders a size as Materialize does: "10 B", "1 GiB".
func formatBytes(n int64) string {
	for _, u := range []struct {
		s string
		m int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.m && n%u.m == 0 {
			return fmt.Sprintf("%d %s", n/u.m, u.s)
		}
	}
	return fmt.Sprintf("%d B", n)
}

func newRowsResult(cols []row.Column, formats []int16, next rowSource) *rowsResult {
	r := &rowsResult{next: next, tagVerb: "SELECT"}
	for i, c := range cols {
		f := resultFormat(formats, i)
		r.fields = append(r.fields, pgwire.Field{Name: c.Name, TypeOID: pgrepr.OID(c.Type), TypeSize: pgrepr.TypeSize(c.Type), TypeMod: c.Typmod(), Format: int16(f)})
		r.types = append(r.types, c.Type)
		r.formats = append(r.formats, f)
	}
	return r
}

// resultFormat normalizes Bind's result formats for column i.
func resultFormat(formats []int16, i int) pgrepr.Format {
	switch {
	case len(formats) == 0:
		return pgrepr.FormatText
	case len(formats) == 1:
		return pgrepr.Format(formats[0])
	case i < len(formats):
		return pgrepr.Format(formats[i])
	}
	return pgrepr.FormatText
}

// fieldsOf describes relation columns for RowDescription.
func fieldsOf(cols []row.Column) []pgwire.Field {
	out := make([]pgwire.Field, len(cols))
	for i, c := range cols {
		out[i] = pgwire.Field{Name: c.Name, TypeOID: pgrepr.OID(c.Type), TypeSize: pgrepr.TypeSize(c.Type), TypeMod: c.Typmod()}
	}
	return out
}

func (r *rowsResult) Describe() pgwire.Description {
	return pgwire.Description{Kind: pgwire.ResultRows, Fields: r.fields}
}

func (r *rowsResult) Next(ctx context.Context) ([][]byte, error) {
	if len(r.pre) > 0 {
		pre := r.pre
		r.pre = nil
		return pre, nil
	}
	rows, err := r.next(ctx)
	if err != nil {
		return nil, err
	}
	r.buf = r.buf[:0]
	offs := make([]int, 0, len(rows)+1)
	for _, rw := range rows {
		offs = append(offs, len(r.buf))
		r.buf = appendDataRow(r.buf, r.types, r.formats, rw)
	}
	offs = append(offs, len(r.buf))
	msgs := make([][]byte, len(rows))
	for i := range rows {
		msgs[i] = r.buf[offs[i]:offs[i+1]]
	}
	r.n += len(rows)
	if r.size += int64(len(r.buf)); r.limit > 0 && r.size > r.limit {
		return nil, errResultTooLarge(r.limit)
	}
	return msgs, nil
}

func (r *rowsResult) Tag() string { return fmt.Sprintf("%s %d", r.tagVerb, r.n) }
func (r *rowsResult) Close() {
	if r.close != nil {
		r.close()
		r.close = nil
	}
}

// appendDataRow appends a DataRow of relation datums.
func appendDataRow(buf []byte, types []row.Type, formats []pgrepr.Format, r row.Row) []byte {
	start := len(buf)
	buf = append(buf, 'D', 0, 0, 0, 0, byte(len(r)>>8), byte(len(r)))
	buf = formatter.AppendTail(buf, types, formats, r)
	n := len(buf) - start - 1
	buf[start+1], buf[start+2], buf[start+3], buf[start+4] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return buf
}

// sliceSource serves rows from memory in batches.
func sliceSource(rows []row.Row) rowSource {
	return func(ctx context.Context) ([]row.Row, error) {
		if len(rows) == 0 {
			return nil, io.EOF
		}
		n := min(len(rows), 1024)
		out := rows[:n]
		rows = rows[n:]
		return out, nil
	}
}

// notice encodes a NoticeResponse.
func notice(code, msg, hint string) []byte {
	return pgwire.AppendNotice(nil, pgwire.Notice{Severity: "NOTICE", Code: code, Message: msg, Hint: hint})
}
