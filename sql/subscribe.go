package sql

import "strconv"

// Subscribe is Materialize's SUBSCRIBE (see SUBSCRIBE-SPEC.md, "Grammar"):
//
//	SUBSCRIBE [TO] {Relation | [RelationID AS Relation] | (Query)}
//	  [ENVELOPE {UPSERT | DEBEZIUM} (KEY (Envelope.Key))
//	   | WITHIN TIMESTAMP ORDER BY WithinTimestampOrderBy]
//	  [WITH (Options)] [AS OF [AT LEAST] AsOf] [UP TO UpTo]
//
// The envelope or ordering may also be written after WITH, AS OF and UP TO, as
// Materialize allows, or between WITH and AS OF, as SUBSCRIBE-SPEC.md allows;
// String() always writes it first. An envelope and WITHIN TIMESTAMP ORDER BY
// exclude each other, as in Materialize.
type Subscribe struct {
	Relation ObjectName // the subscribed object, when Query is nil
	// RelationID is the catalog id of an id reference, [u12 AS name]
	// (Materialize's syntax): the object is resolved by id, so a drop and
	// recreate under the same name cannot slip in. "" for a plain name.
	RelationID string
	Query      *Select // SUBSCRIBE (SELECT ...); nil for a named relation
	Envelope   Envelope
	// WithinTimestampOrderBy orders the updates within one timestamp; its
	// items may name output columns and mz_diff. Nil when not written.
	WithinTimestampOrderBy []OrderItem
	Options                []Option // SNAPSHOT, PROGRESS (Option.Bool reads them)
	AsOf                   *AsOf
	UpTo                   Expr
}

// EnvelopeKind is the output envelope of a SUBSCRIBE.
type EnvelopeKind uint8

// The envelopes.
const (
	EnvelopeNone     EnvelopeKind = iota // plain updates with mz_diff
	EnvelopeUpsert                       // ENVELOPE UPSERT (KEY (...))
	EnvelopeDebezium                     // ENVELOPE DEBEZIUM (KEY (...))
)

// Envelope is SUBSCRIBE's ENVELOPE clause; the zero value means none.
type Envelope struct {
	Kind EnvelopeKind
	Key  []string // KEY columns, in KEY order
}

// DeclareCursor is DECLARE Name CURSOR [WITHOUT HOLD] FOR Query, where Query
// is a *Subscribe or a *Select.
type DeclareCursor struct {
	Name  string
	Query Statement
}

// Fetch is FETCH [FORWARD] [Count | ALL] [FROM | IN] Name [WITH (Options)].
// A missing count is 1. The only option is TIMEOUT.
type Fetch struct {
	Name    string
	All     bool  // FETCH ALL; Count is then 0
	Count   int64 // rows to fetch, unless All
	Options []Option
}

// CloseCursor is CLOSE Name or CLOSE ALL.
type CloseCursor struct {
	Name string // "" with All
	All  bool
}

func (*Subscribe) statementNode()     {}
func (*DeclareCursor) statementNode() {}
func (*Fetch) statementNode()         {}
func (*CloseCursor) statementNode()   {}

func (s *Subscribe) String() string     { return render(s) }
func (s *DeclareCursor) String() string { return render(s) }
func (s *Fetch) String() string         { return render(s) }
func (s *CloseCursor) String() string   { return render(s) }

func (s *Subscribe) format(w *printer) {
	w.WriteString("SUBSCRIBE ")
	if s.Query != nil {
		w.WriteByte('(')
		s.Query.format(w)
		w.WriteByte(')')
	} else if s.RelationID != "" {
		w.WriteByte('[')
		w.WriteString(s.RelationID)
		w.WriteString(" AS ")
		s.Relation.format(w)
		w.WriteByte(']')
	} else {
		s.Relation.format(w)
	}
	switch s.Envelope.Kind {
	case EnvelopeUpsert:
		w.WriteString(" ENVELOPE UPSERT (KEY ")
		w.parenIdentList(s.Envelope.Key)
		w.WriteByte(')')
	case EnvelopeDebezium:
		w.WriteString(" ENVELOPE DEBEZIUM (KEY ")
		w.parenIdentList(s.Envelope.Key)
		w.WriteByte(')')
	}
	if s.WithinTimestampOrderBy != nil {
		w.WriteString(" WITHIN TIMESTAMP ORDER BY ")
		w.orderItems(s.WithinTimestampOrderBy)
	}
	w.with(s.Options)
	w.asOf(s.AsOf)
	if s.UpTo != nil {
		w.WriteString(" UP TO ")
		s.UpTo.format(w)
	}
}

func (s *DeclareCursor) format(w *printer) {
	w.WriteString("DECLARE ")
	w.ident(s.Name)
	w.WriteString(" CURSOR FOR ")
	s.Query.format(w)
}

func (s *Fetch) format(w *printer) {
	w.WriteString("FETCH ")
	if s.All {
		w.WriteString("ALL ")
	} else {
		w.WriteString(strconv.FormatInt(s.Count, 10) + " ")
	}
	w.ident(s.Name)
	w.with(s.Options)
}

func (s *CloseCursor) format(w *printer) {
	if s.All {
		w.WriteString("CLOSE ALL")
		return
	}
	w.WriteString("CLOSE ")
	w.ident(s.Name)
}
