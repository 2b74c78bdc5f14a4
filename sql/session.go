package sql

import "strings"

// TransactionModes are the modes of BEGIN, START TRANSACTION and SET
// TRANSACTION; empty fields were not written.
type TransactionModes struct {
	// IsolationLevel is upper case: "SERIALIZABLE", "STRICT SERIALIZABLE",
	// "REPEATABLE READ", "READ COMMITTED" or "READ UNCOMMITTED".
	IsolationLevel string
	AccessMode     string // "READ ONLY" or "READ WRITE"
}

func (m TransactionModes) format(w *printer) {
	sep := " "
	if m.IsolationLevel != "" {
		w.WriteString(" ISOLATION LEVEL " + m.IsolationLevel)
		sep = ", "
	}
	if m.AccessMode != "" {
		w.WriteString(sep + m.AccessMode)
	}
}

// Begin is BEGIN [WORK | TRANSACTION] [modes] or START TRANSACTION [modes].
type Begin struct{ Modes TransactionModes }

// Commit is COMMIT or END [WORK | TRANSACTION].
type Commit struct{}

// Rollback is ROLLBACK or ABORT [WORK | TRANSACTION].
type Rollback struct{}

// SetTransaction is SET TRANSACTION modes or, with Session, SET SESSION
// CHARACTERISTICS AS TRANSACTION modes.
type SetTransaction struct {
	Session bool
	Modes   TransactionModes
}

// Scope is where a SET or RESET takes effect.
type Scope uint8

// The scopes of SET and RESET.
const (
	ScopeSession Scope = iota // SET [SESSION]: the session, from now on
	ScopeLocal                // SET LOCAL: the current transaction
	ScopeSystem               // ALTER SYSTEM SET/RESET: the server's default
)

// SetVariable is SET [SESSION | LOCAL] Name {TO | =} {Values | DEFAULT}, or
// with ScopeSystem, ALTER SYSTEM SET ....
//
// Name is lower case (unless quoted), dotted parts joined by ".". The special
// forms are normalized: SET TIME ZONE x sets "timezone" (LOCAL meaning
// DEFAULT), SET NAMES x sets "client_encoding", SET SCHEMA x "search_path".
// Values are *StringLit, *NumberLit (with the sign folded into Text), *BoolLit,
// or *ColumnRef for a bare word (SET search_path = public, x = on); ValueText
// turns each into text.
type SetVariable struct {
	Scope   Scope
	Name    string
	Values  []Expr // nil with Default
	Default bool
}

// ResetVariable is RESET Name, RESET ALL, or with ScopeSystem, ALTER SYSTEM
// RESET Name / ALL. RESET TIME ZONE resets "timezone".
type ResetVariable struct {
	Scope Scope // ScopeSession or ScopeSystem
	Name  string
	All   bool
}

// ShowVariable is SHOW Name or SHOW ALL. SHOW TIME ZONE shows "timezone",
// SHOW TRANSACTION ISOLATION LEVEL "transaction_isolation" and SHOW SESSION
// AUTHORIZATION "session_authorization".
type ShowVariable struct {
	Name string
	All  bool
}

// ShowObjects is SHOW {TABLES | VIEWS | MATERIALIZED VIEWS | SOURCES} [FROM
// schema]. From is zero when not written.
type ShowObjects struct {
	Kind ObjectKind
	From ObjectName
}

// ShowColumns is SHOW COLUMNS FROM Table.
type ShowColumns struct{ Table ObjectName }

// ShowCreate is SHOW CREATE {TABLE | VIEW | MATERIALIZED VIEW | SOURCE} Name.
type ShowCreate struct {
	Kind ObjectKind
	Name ObjectName
}

// Discard is DISCARD {ALL | PLANS | SEQUENCES | TEMP}; Target is upper case,
// TEMPORARY normalized to TEMP.
type Discard struct{ Target string }

// Deallocate is DEALLOCATE [PREPARE] {Name | ALL}.
type Deallocate struct {
	Name string
	All  bool
}

func (*Begin) statementNode()          {}
func (*Commit) statementNode()         {}
func (*Rollback) statementNode()       {}
func (*SetTransaction) statementNode() {}
func (*SetVariable) statementNode()    {}
func (*ResetVariable) statementNode()  {}
func (*ShowVariable) statementNode()   {}
func (*ShowObjects) statementNode()    {}
func (*ShowColumns) statementNode()    {}
func (*ShowCreate) statementNode()     {}
func (*Discard) statementNode()        {}
func (*Deallocate) statementNode()     {}

func (s *Begin) String() string          { return render(s) }
func (s *Commit) String() string         { return render(s) }
func (s *Rollback) String() string       { return render(s) }
func (s *SetTransaction) String() string { return render(s) }
func (s *SetVariable) String() string    { return render(s) }
func (s *ResetVariable) String() string  { return render(s) }
func (s *ShowVariable) String() string   { return render(s) }
func (s *ShowObjects) String() string    { return render(s) }
func (s *ShowColumns) String() string    { return render(s) }
func (s *ShowCreate) String() string     { return render(s) }
func (s *Discard) String() string        { return render(s) }
func (s *Deallocate) String() string     { return render(s) }

func (s *Begin) format(w *printer) {
	w.WriteString("BEGIN")
	s.Modes.format(w)
}

func (s *Commit) format(w *printer)   { w.WriteString("COMMIT") }
func (s *Rollback) format(w *printer) { w.WriteString("ROLLBACK") }

func (s *SetTransaction) format(w *printer) {
	if s.Session {
		w.WriteString("SET SESSION CHARACTERISTICS AS TRANSACTION")
	} else {
		w.WriteString("SET TRANSACTION")
	}
	s.Modes.format(w)
}

// variableKeywords are words that, as the first part of a variable name after
// SET, SHOW or RESET, would be read as a keyword: they are always quoted.
var variableKeywords = setOf(
	"all", "session", "local", "time", "transaction", "names", "schema", "role",
	"tables", "views", "materialized", "sources", "columns", "create", "characteristics",
)

// formatVariable writes a variable name. Its dotted parts are written
// separately so that parsing joins them back into the same name.
func formatVariable(w *printer, name string) {
	parts := strings.Split(name, ".")
	for _, p := range parts {
		if p == "" {
			// "a..b" cannot be written part by part; one quoted identifier
			// parses back to the same name.
			w.WriteString(`"` + strings.ReplaceAll(name, `"`, `""`) + `"`)
			return
		}
	}
	for i, p := range parts {
		if i > 0 {
			w.WriteByte('.')
		}
		if i == 0 && variableKeywords[p] {
			w.WriteString(`"` + p + `"`)
		} else {
			w.ident(p)
		}
	}
}

func (s *SetVariable) format(w *printer) {
	switch s.Scope {
	case ScopeLocal:
		w.WriteString("SET LOCAL ")
	case ScopeSystem:
		w.WriteString("ALTER SYSTEM SET ")
	default:
		w.WriteString("SET ")
	}
	formatVariable(w, s.Name)
	w.WriteString(" = ")
	if s.Default {
		w.WriteString("DEFAULT")
		return
	}
	for i, v := range s.Values {
		if i > 0 {
			w.WriteString(", ")
		}
		formatValue(w, v)
	}
}

func (s *ResetVariable) format(w *printer) {
	if s.Scope == ScopeSystem {
		w.WriteString("ALTER SYSTEM ")
	}
	if s.All {
		w.WriteString("RESET ALL")
		return
	}
	w.WriteString("RESET ")
	formatVariable(w, s.Name)
}

func (s *ShowVariable) format(w *printer) {
	if s.All {
		w.WriteString("SHOW ALL")
		return
	}
	w.WriteString("SHOW ")
	formatVariable(w, s.Name)
}

func (s *ShowObjects) format(w *printer) {
	w.WriteString("SHOW " + s.Kind.plural())
	if !s.From.IsZero() {
		w.WriteString(" FROM ")
		s.From.format(w)
	}
}

func (s *ShowColumns) format(w *printer) {
	w.WriteString("SHOW COLUMNS FROM ")
	s.Table.format(w)
}

func (s *ShowCreate) format(w *printer) {
	w.WriteString("SHOW CREATE " + s.Kind.String() + " ")
	s.Name.format(w)
}

func (s *Discard) format(w *printer) { w.WriteString("DISCARD " + s.Target) }

func (s *Deallocate) format(w *printer) {
	if s.All {
		w.WriteString("DEALLOCATE ALL")
		return
	}
	w.WriteString("DEALLOCATE ")
	w.ident(s.Name)
}
