package sql

// Insert is INSERT INTO Table [(Columns)] VALUES (...), ... or INSERT INTO
// Table [(Columns)] SELECT ...: exactly one of Values and Query is set.
type Insert struct {
	Table   ObjectName
	Columns []string // nil when not written (all columns, in order)
	Values  [][]Expr // one slice per row
	Query   *Select
}

// Update is UPDATE Table SET Column = Value, ... [WHERE Where].
type Update struct {
	Table ObjectName
	Set   []Assignment
	Where Expr
}

// Assignment is one Column = Value of UPDATE ... SET.
type Assignment struct {
	Column string
	Value  Expr
}

// Delete is DELETE FROM Table [WHERE Where].
type Delete struct {
	Table ObjectName
	Where Expr
}

// CopyDirection says which way COPY moves rows.
type CopyDirection uint8

// The COPY directions; the only endpoints are the client's STDIN and STDOUT.
const (
	CopyFrom CopyDirection = iota + 1 // COPY ... FROM STDIN: the client sends rows
	CopyTo                            // COPY ... TO STDOUT: the server sends rows
)

// Copy is COPY Table [(Columns)] FROM STDIN, COPY Table [(Columns)] TO STDOUT,
// or COPY (Query) TO STDOUT, with options.
//
// Options are normalized to the parenthesized form whichever syntax was
// written: the old "CSV HEADER" becomes FORMAT csv, HEADER and "BINARY" becomes
// FORMAT binary. Names: FORMAT (a bare word: text, csv or binary), DELIMITER,
// NULL, QUOTE, ESCAPE, ENCODING (strings), HEADER (a Boolean).
type Copy struct {
	Table     ObjectName // zero when Query is set
	Columns   []string   // nil when not written
	Query     Statement  // *Select or *Subscribe for COPY (...) TO STDOUT; else nil
	Direction CopyDirection
	Options   []Option
}

func (*Insert) statementNode() {}
func (*Update) statementNode() {}
func (*Delete) statementNode() {}
func (*Copy) statementNode()   {}

func (s *Insert) String() string { return render(s) }
func (s *Update) String() string { return render(s) }
func (s *Delete) String() string { return render(s) }
func (s *Copy) String() string   { return render(s) }

func (s *Insert) format(w *printer) {
	w.WriteString("INSERT INTO ")
	s.Table.format(w)
	if s.Columns != nil {
		w.WriteByte(' ')
		w.parenIdentList(s.Columns)
	}
	if s.Query != nil {
		w.WriteByte(' ')
		s.Query.format(w)
		return
	}
	w.WriteString(" VALUES ")
	for i, row := range s.Values {
		if i > 0 {
			w.WriteString(", ")
		}
		w.WriteByte('(')
		w.exprList(row)
		w.WriteByte(')')
	}
}

func (s *Update) format(w *printer) {
	w.WriteString("UPDATE ")
	s.Table.format(w)
	w.WriteString(" SET ")
	for i, a := range s.Set {
		if i > 0 {
			w.WriteString(", ")
		}
		w.ident(a.Column)
		w.WriteString(" = ")
		a.Value.format(w)
	}
	if s.Where != nil {
		w.WriteString(" WHERE ")
		s.Where.format(w)
	}
}

func (s *Delete) format(w *printer) {
	w.WriteString("DELETE FROM ")
	s.Table.format(w)
	if s.Where != nil {
		w.WriteString(" WHERE ")
		s.Where.format(w)
	}
}

func (s *Copy) format(w *printer) {
	w.WriteString("COPY ")
	if s.Query != nil {
		w.WriteByte('(')
		s.Query.format(w)
		w.WriteByte(')')
	} else {
		s.Table.format(w)
		if s.Columns != nil {
			w.WriteByte(' ')
			w.parenIdentList(s.Columns)
		}
	}
	if s.Direction == CopyFrom {
		w.WriteString(" FROM STDIN")
	} else {
		w.WriteString(" TO STDOUT")
	}
	if s.Options != nil {
		w.WriteString(" WITH ")
		formatOptions(w, s.Options, " ")
	}
}
