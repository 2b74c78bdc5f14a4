package adapter

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/shardtail/shardtail/catalog"
	"github.com/shardtail/shardtail/expr"
	"github.com/shardtail/shardtail/formatter"
	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/pgrepr"
	"github.com/shardtail/shardtail/pgwire"
	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/sql"
	"github.com/shardtail/shardtail/storage"
)

// writableTable resolves a DML target and checks it may be written.
func (s *Session) writableTable(n sql.ObjectName, priv string) (*catalog.Item, error) {
	it, err := s.lookup(n)
	if err != nil {
		return nil, err
	}
	if !it.Writable() {
		return nil, errReadOnly(it)
	}
	if err := s.checkPrivilege(it, priv); err != nil {
		return nil, err
	}
	return it, nil
}

// insertTarget resolves the table and column list that INSERT and COPY
// FROM write to.
func (s *Session) insertTarget(table sql.ObjectName, columns []string) (*catalog.Item, []int, error) {
	it, err := s.writableTable(table, "INSERT")
	if err != nil {
		return nil, nil, err
	}
	cols, err := targetColumns(it, columns)
	return it, cols, err
}

// targetColumns maps an INSERT/COPY column list to schema indexes.
func targetColumns(it *catalog.Item, cols []string) ([]int, error) {
	if cols == nil {
		idx := make([]int, len(it.Schema.Columns))
		for i := range idx {
			idx[i] = i
		}
		return idx, nil
	}
	idx := make([]int, len(cols))
	seen := map[int]bool{}
	for i, c := range cols {
		j := it.Schema.Index(c)
		if j < 0 {
			return nil, errorf(codeUndefinedColumn, "column %q of relation %q does not exist", c, it.Name)
		}
		if seen[j] {
			return nil, errorf("42701", "column %q specified more than once", c)
		}
		seen[j] = true
		idx[i] = j
	}
	return idx, nil
}

// implicitTargets is an INSERT's target columns for a source of n
// columns: without a column list, the table's first n, as in PostgreSQL
// (the others are NULL); with one, cols.
func implicitTargets(columns []string, cols []int, n int) []int {
	if columns == nil && n < len(cols) {
		return cols[:n]
	}
	return cols
}

// checkNotNull enforces NOT NULL on a full row.
func checkNotNull(it *catalog.Item, r row.Row) error {
	for i, c := range it.Schema.Columns {
		if r[i] == nil && !c.Nullable {
			return &Error{Code: codeNotNullViolation, Message: fmt.Sprintf("null value in column %q violates not-null constraint", c.Name)}
		}
	}
	return nil
}

// write commits updates to a table now, or buffers them until COMMIT in a
// transaction.
func (s *Session) write(ctx context.Context, it *catalog.Item, updates []row.Update) error {
	if s.tx == txIdle {
		return s.c.write(ctx, it, updates)
	}
	var n int64
	for _, u := range updates {
		n += u.Size()
	}
	if err := s.holdTxWrite(n); err != nil {
		return err
	}
	return s.buffer(it, updates)
}

// buffer adds updates, counted already (holdTxWrite), to the
// transaction's writes.
func (s *Session) buffer(it *catalog.Item, updates []row.Update) error {
	if s.txSubscribe || s.upSubscribe {
		// Its changes would reach the subscribe only after it ended
		// (Materialize refuses it too, whatever rows it touches).
		return errReadOnlyTx
	}
	s.txWrote = true
	if len(updates) > 0 {
		s.txWrites = append(s.txWrites, pendingWrite{item: it, updates: updates})
	}
	return nil
}

// holdTxWrite counts n more bytes of writes the transaction holds until
// it ends, in the process's memory budget. When the budget's policy
// cannot make room for them (it shrinks windows and detaches queues; it
// ends no one's subscribe for a transaction), the statement fails with
// 53200: the client that sends more than the server may hold pays, not
// the others. A transaction's writes are in memory until COMMIT; a load
// outside a block streams (COPY FROM) and is not bounded by this.
func (s *Session) holdTxWrite(n int64) error {
	s.txBytes += n
	s.c.memTxn.Add(n)
	b := s.c.cfg.Tail.Budget
	if !b.Over() {
		return nil
	}
	b.Enforce()
	if !b.Over() {
		return nil
	}
	return &Error{Code: codeOutOfMemory, Message: fmt.Sprintf("transaction's writes exceed the server's memory budget of %s (--memory-budget)", formatBytes(b.Limit())),
		hint: "Commit in smaller transactions, or load with COPY FROM outside a transaction block, which streams."}
}

// write appends to a table's shard at a fresh timestamp.
func (c *Coordinator) write(ctx context.Context, it *catalog.Item, updates []row.Update) error {
	if len(updates) == 0 {
		return nil
	}
	if c.isProxy() {
		return errorf(codeReadOnlyTx, "writes are not served by a tail process")
	}
	if _, err := c.storage.Append(ctx, it.Shard, updates); err != nil {
		return mapPersistErr(err, it.Name)
	}
	c.metrics.writes.Inc()
	return nil
}

func (s *Session) planInsert(st *sql.Insert, paramOIDs []uint32) (*plan, error) {
	it, cols, err := s.insertTarget(st.Table, st.Columns)
	if err != nil {
		return nil, err
	}
	if st.Query != nil {
		q, err := s.planQuery(st.Query, paramOIDs)
		if err != nil {
			return nil, err
		}
		out := q.schema()
		cols = implicitTargets(st.Columns, cols, len(out.Columns))
		if len(out.Columns) != len(cols) {
			return nil, errorf(codeSyntax, "INSERT has %d target columns but the query returns %d", len(cols), len(out.Columns))
		}
		assign, err := assignFrom(it.Schema, cols, out.Columns)
		if err != nil {
			return nil, err
		}
		return &plan{params: q.params, exec: func(ctx context.Context, params []row.Datum, _ []int16) (pgwire.Result, error) {
			src, err := s.runQuery(ctx, q, params)
			if err != nil {
				return nil, err
			}
			in := inserts{it: it, cols: cols, assign: assign}
			for {
				rows, err := src.next(ctx)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return nil, err
				}
				for _, r := range rows {
					if err := in.add(r); err != nil {
						return nil, err
					}
				}
			}
			return s.insert(ctx, &in)
		}}, nil
	}
	// VALUES: each expression is compiled against the target column's type.
	values := make([][]*scalar, len(st.Values))
	var params []uint32
	if len(st.Values) > 0 {
		cols = implicitTargets(st.Columns, cols, len(st.Values[0]))
	}
	for i, vals := range st.Values {
		if len(vals) != len(cols) {
			if len(vals) > len(cols) {
				return nil, errorf(codeSyntax, "INSERT has more expressions than target columns")
			}
			return nil, errorf(codeSyntax, "INSERT has more target columns than expressions")
		}
		for j, e := range vals {
			target := it.Schema.Columns[cols[j]]
			sc, p, err := compileScalar(e, row.Schema{}, "", &target, paramOIDs)
			if err != nil {
				return nil, err
			}
			params = mergeParams(params, p)
			values[i] = append(values[i], sc)
		}
	}
	assign := newColumnAssign(it.Schema)
	return &plan{params: params, exec: func(ctx context.Context, params []row.Datum, _ []int16) (pgwire.Result, error) {
		in := inserts{it: it, cols: cols, assign: assign, updates: make([]row.Update, 0, len(values))}
		for _, vals := range values {
			r := make(row.Row, len(vals))
			for j, sc := range vals {
				d, err := sc.eval(nil, params)
				if err != nil {
					return nil, err
				}
				r[j] = d
			}
			if err := in.add(r); err != nil {
				return nil, err
			}
		}
		return s.insert(ctx, &in)
	}}, nil
}

// inserts collects an INSERT's rows into the table it as updates.
type inserts struct {
	it      *catalog.Item
	cols    []int // the target columns
	assign  columnAssign
	updates []row.Update
}

// add adds r, one value for each target column (see insertedRow).
func (in *inserts) add(r row.Row) error {
	full, err := insertedRow(in.it, in.cols, in.assign, r)
	if err != nil {
		return err
	}
	in.updates = append(in.updates, row.Update{Row: full, Diff: 1})
	return nil
}

// insertedRow is the row of the table it that INSERT or COPY FROM adds
// for vals, one value for each target column in cols, given its stored
// form by assign: the other columns are NULL, which must not break a NOT
// NULL constraint.
func insertedRow(it *catalog.Item, cols []int, assign columnAssign, vals row.Row) (row.Row, error) {
	full := make(row.Row, len(it.Schema.Columns))
	for i, c := range cols {
		d, err := assign.value(c, vals[i])
		if err != nil {
			return nil, err
		}
		full[c] = d
	}
	if err := checkNotNull(it, full); err != nil {
		return nil, err
	}
	return full, nil
}

// insert writes the collected rows to the table.
func (s *Session) insert(ctx context.Context, in *inserts) (pgwire.Result, error) {
	if err := s.write(ctx, in.it, in.updates); err != nil {
		return nil, err
	}
	return command(fmt.Sprintf("INSERT 0 %d", len(in.updates))), nil
}

func mergeParams(a, b []uint32) []uint32 {
	for i, oid := range b {
		if i >= len(a) {
			a = append(a, oid)
		} else if a[i] == 0 {
			a[i] = oid
		}
	}
	return a
}

// planModify plans UPDATE (and, with set == nil, DELETE): a
// read-modify-write of the matching rows, committed at once under the
// table's write lock or, in a transaction, buffered (modifyInTx).
func (s *Session) planModify(table sql.ObjectName, where sql.Expr, set []sql.Assignment, paramOIDs []uint32) (*plan, error) {
	priv, verb := "UPDATE", "UPDATE"
	if set == nil {
		priv, verb = "DELETE", "DELETE"
	}
	it, err := s.writableTable(table, priv)
	if err != nil {
		return nil, err
	}
	// It reads the rows it changes: SELECT too, as Materialize requires
	// of every read-then-write.
	if err := s.checkPrivilege(it, "SELECT"); err != nil {
		return nil, err
	}
	var params []uint32
	var filter *scalar
	if where != nil {
		if filter, params, err = compileScalar(where, it.Schema, it.Name, nil, paramOIDs); err != nil {
			return nil, err
		}
		if t := filter.e.Type(); t != expr.TypeBool && t != expr.TypeUnknown {
			return nil, errorf(codeDatatypeMismatch, "argument of WHERE must be type boolean, not type %s", t)
		}
	}
	assign := newColumnAssign(it.Schema)
	assigns := make(map[int]*scalar, len(set))
	for _, a := range set {
		c := it.Schema.Index(a.Column)
		if c < 0 {
			return nil, errorf(codeUndefinedColumn, "column %q of relation %q does not exist", a.Column, it.Name)
		}
		sc, p, err := compileScalar(a.Value, it.Schema, it.Name, &it.Schema.Columns[c], paramOIDs)
		if err != nil {
			return nil, err
		}
		params = mergeParams(params, p)
		assigns[c] = sc
	}
	return &plan{params: params, exec: func(ctx context.Context, params []row.Datum, _ []int16) (pgwire.Result, error) {
		if s.c.isProxy() {
			return nil, errorf(codeReadOnlyTx, "writes are not served by a tail process")
		}
		n := 0
		// modify derives the statement's retractions and insertions from
		// the table's current contents.
		modify := func(current []row.Update) ([]row.Update, error) {
			var out []row.Update
			n = 0
			for _, u := range current {
				if filter != nil {
					ok, err := filter.eval(u.Row, params)
					if err != nil {
						return nil, err
					}
					if ok != true {
						continue
					}
				}
				if u.Diff < 0 {
					continue
				}
				n += int(u.Diff)
				out = append(out, row.Update{Row: u.Row, Diff: -u.Diff})
				if set != nil {
					nr := append(row.Row(nil), u.Row...)
					for c, sc := range assigns {
						d, err := sc.eval(u.Row, params)
						if err != nil {
							return nil, err
						}
						if d, err = assign.value(c, d); err != nil {
							return nil, err
						}
						nr[c] = d
					}
					if err := checkNotNull(it, nr); err != nil {
						return nil, err
					}
					out = append(out, row.Update{Row: nr, Diff: u.Diff})
				}
			}
			return out, nil
		}
		if s.bufferModify() {
			if err := s.modifyInTx(ctx, it, modify); err != nil {
				return nil, err
			}
			return command(fmt.Sprintf("%s %d", verb, n)), nil
		}
		_, err := s.c.storage.ReadModifyWrite(ctx, it.Shard, modify)
		if err != nil {
			return nil, mapPersistErr(err, it.Name)
		}
		if n > 0 {
			s.c.metrics.writes.Inc()
		}
		return command(fmt.Sprintf("%s %d", verb, n)), nil
	}}, nil
}

// bufferModify reports whether an UPDATE or DELETE joins the transaction
// (a block, a multi-statement simple query, or an extended-protocol batch
// after a write: it must see that write, which waits for Sync) rather
// than committing at once. Otherwise an extended-protocol batch's implicit
// transaction commits them at once, retrying on a concurrent write
// (Storage.ReadModifyWrite): a lone UPDATE sent with
// Parse/Bind/Execute/Sync, as most drivers send every statement, must not
// fail with 40001 where it can simply read again.
func (s *Session) bufferModify() bool {
	return s.inBlock() || (s.tx == txImplicit && (s.txMulti || s.txWrote))
}

// modifyInTx runs an UPDATE or DELETE of the table it in the transaction:
// modify sees the table at the latest time, together with the
// transaction's own earlier writes to it, and its result is buffered for
// COMMIT with the transaction's other writes. The transaction's read
// timestamp of a table is its first read of it: COMMIT fails if another
// commit wrote the table after that (see Session.commit), so every read
// the transaction made is what the table holds at the commit's time.
// Reading each table at its latest time, rather than all at the first
// read's, keeps a slow block readable: tables keep only RETAIN HISTORY
// (default 1 s) of history.
func (s *Session) modifyInTx(ctx context.Context, it *catalog.Item, modify func([]row.Update) ([]row.Update, error)) error {
	ts, err := s.c.storage.TxnReadTS(ctx)
	if errors.Is(err, storage.ErrNoTxns) {
		return errorf(codeFeatureNotSupp, "UPDATE and DELETE in transactions need the txns shard")
	}
	if err != nil {
		return storageError(err)
	}
	current, err := s.c.storage.ReadTableAt(ctx, it.Shard, ts)
	if err != nil {
		return mapPersistErr(err, it.Name)
	}
	for i := range current {
		current[i].T = 0
	}
	for _, w := range s.txWrites {
		if w.item.Shard != it.Shard {
			continue
		}
		for _, u := range w.updates {
			u.T = 0
			current = append(current, u)
		}
	}
	current = row.Consolidate(current)
	out, err := modify(current)
	if err != nil {
		return err
	}
	if s.txRead == nil {
		s.txRead = map[string]uint64{}
	}
	if _, ok := s.txRead[it.Shard]; !ok {
		s.txRead[it.Shard] = ts
	}
	return s.write(ctx, it, out)
}

func (s *Session) planUpdate(st *sql.Update, paramOIDs []uint32) (*plan, error) {
	if len(st.Set) == 0 {
		return nil, errorf(codeSyntax, "UPDATE requires SET")
	}
	return s.planModify(st.Table, st.Where, st.Set, paramOIDs)
}

func (s *Session) planDelete(st *sql.Delete, paramOIDs []uint32) (*plan, error) {
	return s.planModify(st.Table, st.Where, nil, paramOIDs)
}

// copyOptions reads COPY's FORMAT and its format options.
type copyOptions struct {
	format formatter.CopyFormat
	text   pgrepr.TextOptions
	csv    pgrepr.CSVOptions
}

func parseCopyOptions(opts []sql.Option) (copyOptions, error) {
	o := copyOptions{format: formatter.CopyText, text: pgrepr.DefaultTextOptions(), csv: pgrepr.DefaultCSVOptions()}
	char := func(opt sql.Option) (byte, error) {
		v, ok := sql.ValueText(opt.Value)
		if !ok || len(v) != 1 {
			return 0, errorf(codeInvalidParamValue, "COPY %s must be a single one-byte character", opt.Name)
		}
		return v[0], nil
	}
	for _, opt := range opts {
		switch opt.Name {
		case "FORMAT":
			v, _ := sql.ValueText(opt.Value)
			switch v {
			case "text":
				o.format = formatter.CopyText
			case "csv":
				o.format = formatter.CopyCSV
			case "binary":
				o.format = formatter.CopyBinary
			default:
				return o, errorf(codeInvalidParamValue, "COPY format %q not recognized", v)
			}
		case "DELIMITER":
			c, err := char(opt)
			if err != nil {
				return o, err
			}
			o.text.Delimiter, o.csv.Delimiter = c, c
		case "NULL":
			v, _ := sql.ValueText(opt.Value)
			o.text.Null, o.csv.Null = v, v
		case "HEADER":
			b, err := opt.Bool()
			if err != nil {
				return o, errorf(codeInvalidParamValue, "%v", err)
			}
			o.text.Header, o.csv.Header = b, b
		case "QUOTE":
			c, err := char(opt)
			if err != nil {
				return o, err
			}
			o.csv.Quote = c
		case "ESCAPE":
			c, err := char(opt)
			if err != nil {
				return o, err
			}
			o.csv.Escape = c
		case "ENCODING":
		default:
			return o, errorf(codeSyntax, "option %q not recognized", opt.Name)
		}
	}
	return o, nil
}

func (s *Session) planCopy(st *sql.Copy) (*plan, error) {
	opts, err := parseCopyOptions(st.Options)
	if err != nil {
		return nil, err
	}
	if st.Direction == sql.CopyFrom {
		return s.planCopyFrom(st, opts)
	}
	switch q := st.Query.(type) {
	case *sql.Subscribe:
		p, err := s.planSubscribeStmt(q, nil)
		if err != nil {
			return nil, err
		}
		return execOnly(func(ctx context.Context) (pgwire.Result, error) {
			if err := s.noteRead(true); err != nil {
				return nil, err
			}
			sub, err := p.start(ctx, nil, s.current)
			if err != nil {
				return nil, err
			}
			return &copySubscribeResult{p: p, sub: sub, enc: formatter.NewCopyEncoderOptions(p.opts, opts.format, opts.text, opts.csv), format: opts.format}, nil
		}), nil
	case *sql.Select:
		return s.planCopyQuery(q, opts)
	case nil:
		sel := &sql.Select{Items: []sql.SelectItem{{Expr: &sql.Star{}}}, From: []sql.TableExpr{&sql.TableName{Name: st.Table}}}
		if st.Columns != nil {
			sel.Items = nil
			for _, c := range st.Columns {
				sel.Items = append(sel.Items, sql.SelectItem{Expr: &sql.ColumnRef{Column: c}})
			}
		}
		return s.planCopyQuery(sel, opts)
	}
	return nil, errorf(codeFeatureNotSupp, "COPY of %T not supported", st.Query)
}

// planCopyQuery streams a query's rows as COPY TO STDOUT.
func (s *Session) planCopyQuery(sel *sql.Select, opts copyOptions) (*plan, error) {
	q, err := s.planQuery(sel, nil)
	if err != nil {
		return nil, err
	}
	return execOnly(func(ctx context.Context) (pgwire.Result, error) {
		src, err := s.runQuery(ctx, q, nil)
		if err != nil {
			return nil, err
		}
		return &copyQueryResult{schema: q.schema(), src: src, opts: opts}, nil
	}), nil
}

type copyQueryResult struct {
	schema row.Schema
	src    *querySource
	opts   copyOptions
	n      int
	start  bool
	done   bool
	buf    []byte
}

func (r *copyQueryResult) types() []row.Type {
	t := make([]row.Type, len(r.schema.Columns))
	for i, c := range r.schema.Columns {
		t[i] = c.Type
	}
	return t
}

func (r *copyQueryResult) Describe() pgwire.Description {
	f := pgwire.FormatText
	if r.opts.format == formatter.CopyBinary {
		f = pgwire.FormatBinary
	}
	fields := fieldsOf(r.schema.Columns)
	for i := range fields {
		fields[i].Format = f
	}
	return pgwire.Description{Kind: pgwire.ResultCopyOut, Fields: fields, CopyFormat: f}
}

func (r *copyQueryResult) Next(ctx context.Context) ([][]byte, error) {
	if r.done {
		return nil, io.EOF
	}
	var msgs [][]byte
	var data []byte
	if !r.start {
		r.start = true
		switch {
		case r.opts.format == formatter.CopyBinary:
			data = pgrepr.AppendCopyBinaryHeader(data)
		case r.opts.format == formatter.CopyCSV && r.opts.csv.Header:
			data = pgrepr.AppendCopyCSVHeader(data, columnNames(r.schema), r.opts.csv)
		case r.opts.format == formatter.CopyText && r.opts.text.Header:
			data = pgrepr.AppendCopyTextHeader(data, columnNames(r.schema), r.opts.text)
		}
	}
	rows, err := r.src.next(ctx)
	if errors.Is(err, io.EOF) {
		r.done = true
		if r.opts.format == formatter.CopyBinary {
			data = pgrepr.AppendCopyBinaryTrailer(data)
		}
		if len(data) > 0 {
			return [][]byte{pgwire.AppendCopyData(nil, data)}, nil
		}
		return nil, io.EOF
	}
	if err != nil {
		return nil, err
	}
	types := r.types()
	r.buf = r.buf[:0]
	if len(data) > 0 {
		r.buf = pgwire.AppendCopyData(r.buf, data)
		msgs = append(msgs, r.buf)
	}
	var line []byte
	for _, rw := range rows {
		line = line[:0]
		switch r.opts.format {
		case formatter.CopyBinary:
			line = pgrepr.AppendCopyBinaryRow(line, types, rw)
		case formatter.CopyCSV:
			line = pgrepr.AppendCopyCSVRow(line, types, rw, r.opts.csv)
		default:
			line = pgrepr.AppendCopyTextRowOptions(line, types, rw, r.opts.text)
		}
		msgs = append(msgs, pgwire.AppendCopyData(nil, line))
	}
	r.n += len(rows)
	return msgs, nil
}

func (r *copyQueryResult) Tag() string { return fmt.Sprintf("COPY %d", r.n) }
func (r *copyQueryResult) Close()      { r.src.close() }

func columnNames(s row.Schema) []string {
	out := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		out[i] = c.Name
	}
	return out
}

func (s *Session) planCopyFrom(st *sql.Copy, opts copyOptions) (*plan, error) {
	it, cols, err := s.insertTarget(st.Table, st.Columns)
	if err != nil {
		return nil, err
	}
	return execOnly(func(ctx context.Context) (pgwire.Result, error) {
		return &copyInResult{s: s, it: it, cols: cols, assign: newColumnAssign(it.Schema), opts: opts}, nil
	}), nil
}

type copyInResult struct {
	s      *Session
	it     *catalog.Item
	cols   []int
	assign columnAssign
	opts   copyOptions
	n      int
	done   bool
}

func (r *copyInResult) Describe() pgwire.Description {
	f := pgwire.FormatText
	if r.opts.format == formatter.CopyBinary {
		f = pgwire.FormatBinary
	}
	fields := make([]pgwire.Field, len(r.cols))
	for i, c := range r.cols {
		col := r.it.Schema.Columns[c]
		fields[i] = pgwire.Field{Name: col.Name, TypeOID: pgrepr.OID(col.Type), Format: f}
	}
	return pgwire.Description{Kind: pgwire.ResultCopyIn, Fields: fields, CopyFormat: f}
}

func (r *copyInResult) CopyIn(ctx context.Context, in io.Reader) error {
	var cr *pgrepr.CopyReader
	var err error
	switch r.opts.format {
	case formatter.CopyCSV:
		cr, err = pgrepr.NewCopyCSVReader(in, r.opts.csv)
	case formatter.CopyBinary:
		cr = pgrepr.NewCopyBinaryReader(in)
	default:
		cr, err = pgrepr.NewCopyTextReader(in, r.opts.text)
	}
	if err != nil {
		return err
	}
	names := make([]string, len(r.cols))
	types := make([]row.Type, len(r.cols))
	for i, c := range r.cols {
		names[i] = r.it.Schema.Columns[c].Name
		types[i] = r.it.Schema.Columns[c].Type
	}
	cr.Describe(r.it.Name, names)
	read := func(add func(row.Row) error) error {
		for {
			vals, err := cr.ReadRow(types, nil)
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			full, err := insertedRow(r.it, r.cols, r.assign, vals)
			if err != nil {
				return err
			}
			if err := add(full); err != nil {
				return err
			}
			r.n++
		}
	}
	if r.s.tx != txIdle {
		// In a transaction the rows wait for COMMIT with its other writes,
		// counted as they arrive.
		var batch []row.Update
		err := read(func(rw row.Row) error {
			u := row.Update{Row: rw, Diff: 1}
			batch = append(batch, u)
			return r.s.holdTxWrite(u.Size())
		})
		if err != nil {
			return err
		}
		return r.s.buffer(r.it, batch)
	}
	if r.s.c.isProxy() {
		return errorf(codeReadOnlyTx, "writes are not served by a tail process")
	}
	// The load streams into parts as it arrives and commits as one batch at
	// the end: memory stays bounded, and a bad row anywhere changes nothing.
	_, err = r.s.c.storage.AppendBatch(ctx, r.it.Shard, func(b *persist.BatchBuilder) error {
		return read(func(rw row.Row) error { return b.Add(ctx, row.Update{Row: rw, Diff: 1}) })
	})
	if err != nil {
		return mapPersistErr(err, r.it.Name)
	}
	r.s.c.metrics.writes.Inc()
	return nil
}

func (r *copyInResult) Next(ctx context.Context) ([][]byte, error) { return nil, io.EOF }
func (r *copyInResult) Tag() string                                { return fmt.Sprintf("COPY %d", r.n) }
func (r *copyInResult) Close()                                     {}
