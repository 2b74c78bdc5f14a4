package sql

// CreateTable is CREATE TABLE [IF NOT EXISTS] Name (Columns) [WITH (With)].
type CreateTable struct {
	Name        ObjectName
	IfNotExists bool
	Columns     []ColumnDef // may be empty: CREATE TABLE t ()
	With        []Option    // RETAIN HISTORY
}

// ColumnDef is one column of CREATE TABLE: Name Type [NOT NULL | NULL].
type ColumnDef struct {
	Name    string
	Type    TypeName
	NotNull bool
}

// CreateView is CREATE [MATERIALIZED] VIEW [IF NOT EXISTS] Name [(Columns)]
// [WITH (With)] AS Query. With (RETAIN HISTORY) is only accepted for
// materialized views.
type CreateView struct {
	Name         ObjectName
	Materialized bool
	IfNotExists  bool
	Columns      []string // output column names; nil when not written
	With         []Option
	Query        *Select
}

// CreateSource is CREATE SOURCE [IF NOT EXISTS] Name FROM LOAD GENERATOR
// Generator [(Options)] [WITH (With)].
type CreateSource struct {
	Name        ObjectName
	IfNotExists bool
	// Generator is the load generator in upper case: "COUNTER", "KEY VALUE",
	// "CLOCK", "AUCTION", "MARKETING", "TPCH" or "DATUMS".
	Generator string
	Options   []Option // TICK INTERVAL, KEYS, SNAPSHOT ROUNDS, ...; nil when not written
	With      []Option // RETAIN HISTORY
}

// Drop is DROP Kind [IF EXISTS] Names [CASCADE | RESTRICT]. RESTRICT is the
// default and is not recorded. Role names have only Name set.
type Drop struct {
	Kind     ObjectKind
	IfExists bool
	Names    []ObjectName
	Cascade  bool
}

// AlterObject is ALTER {TABLE | VIEW | MATERIALIZED VIEW | SOURCE} [IF EXISTS]
// Name SET (Options), or with Reset, RESET (Options) where the options have no
// values. The only option is RETAIN HISTORY.
type AlterObject struct {
	Kind     ObjectKind
	IfExists bool
	Name     ObjectName
	Reset    bool
	Options  []Option
}

// CreateRole is CREATE ROLE Name [WITH] Options, with options LOGIN, NOLOGIN,
// SUPERUSER, ..., and PASSWORD whose value is a *StringLit or *NullLit.
type CreateRole struct {
	Name    string
	Options []Option
}

// AlterRole is ALTER ROLE Name [WITH] Options, options as in CreateRole.
type AlterRole struct {
	Name    string
	Options []Option
}

// Grant is GRANT Privileges ON [TABLE] Objects TO Roles, or with Revoke,
// REVOKE ... FROM Roles.
type Grant struct {
	Revoke bool
	// Privileges are upper case: SELECT, INSERT, UPDATE, DELETE, or the single
	// "ALL" for ALL [PRIVILEGES].
	Privileges []string
	Objects    []ObjectName
	Roles      []string // "public" for PUBLIC
}

func (*CreateTable) statementNode()  {}
func (*CreateView) statementNode()   {}
func (*CreateSource) statementNode() {}
func (*Drop) statementNode()         {}
func (*AlterObject) statementNode()  {}
func (*CreateRole) statementNode()   {}
func (*AlterRole) statementNode()    {}
func (*Grant) statementNode()        {}

func (s *CreateTable) String() string  { return render(s) }
func (s *CreateView) String() string   { return render(s) }
func (s *CreateSource) String() string { return render(s) }
func (s *Drop) String() string         { return render(s) }
func (s *AlterObject) String() string  { return render(s) }
func (s *CreateRole) String() string   { return render(s) }
func (s *AlterRole) String() string    { return render(s) }
func (s *Grant) String() string        { return render(s) }

func (w *printer) ifNotExists(b bool) {
	if b {
		w.WriteString("IF NOT EXISTS ")
	}
}

func (w *printer) with(opts []Option) {
	if opts != nil {
		w.WriteString(" WITH ")
		formatOptions(w, opts, " = ")
	}
}

func (s *CreateTable) format(w *printer) {
	w.WriteString("CREATE TABLE ")
	w.ifNotExists(s.IfNotExists)
	s.Name.format(w)
	w.WriteString(" (")
	for i, c := range s.Columns {
		if i > 0 {
			w.WriteString(", ")
		}
		w.ident(c.Name)
		w.WriteByte(' ')
		c.Type.format(w)
		if c.NotNull {
			w.WriteString(" NOT NULL")
		}
	}
	w.WriteByte(')')
	w.with(s.With)
}

func (s *CreateView) format(w *printer) {
	w.WriteString("CREATE ")
	if s.Materialized {
		w.WriteString("MATERIALIZED ")
	}
	w.WriteString("VIEW ")
	w.ifNotExists(s.IfNotExists)
	s.Name.format(w)
	if s.Columns != nil {
		w.WriteByte(' ')
		w.parenIdentList(s.Columns)
	}
	w.with(s.With)
	w.WriteString(" AS ")
	s.Query.format(w)
}

func (s *CreateSource) format(w *printer) {
	w.WriteString("CREATE SOURCE ")
	w.ifNotExists(s.IfNotExists)
	s.Name.format(w)
	w.WriteString(" FROM LOAD GENERATOR " + s.Generator)
	if s.Options != nil {
		w.WriteByte(' ')
		formatOptions(w, s.Options, " ")
	}
	w.with(s.With)
}

func (s *Drop) format(w *printer) {
	w.WriteString("DROP " + s.Kind.String() + " ")
	if s.IfExists {
		w.WriteString("IF EXISTS ")
	}
	for i, n := range s.Names {
		if i > 0 {
			w.WriteString(", ")
		}
		n.format(w)
	}
	if s.Cascade {
		w.WriteString(" CASCADE")
	}
}

func (s *AlterObject) format(w *printer) {
	w.WriteString("ALTER " + s.Kind.String() + " ")
	if s.IfExists {
		w.WriteString("IF EXISTS ")
	}
	s.Name.format(w)
	if s.Reset {
		w.WriteString(" RESET ")
	} else {
		w.WriteString(" SET ")
	}
	formatOptions(w, s.Options, " = ")
}

func formatRoleOptions(w *printer, opts []Option) {
	for _, o := range opts {
		w.WriteByte(' ')
		o.formatSep(w, " ")
	}
}

func (s *CreateRole) format(w *printer) {
	w.WriteString("CREATE ROLE ")
	w.ident(s.Name)
	formatRoleOptions(w, s.Options)
}

func (s *AlterRole) format(w *printer) {
	w.WriteString("ALTER ROLE ")
	w.ident(s.Name)
	formatRoleOptions(w, s.Options)
}

func (s *Grant) format(w *printer) {
	verb, prep := "GRANT ", " TO "
	if s.Revoke {
		verb, prep = "REVOKE ", " FROM "
	}
	w.WriteString(verb)
	for i, p := range s.Privileges {
		if i > 0 {
			w.WriteString(", ")
		}
		w.WriteString(p)
	}
	w.WriteString(" ON ")
	for i, n := range s.Objects {
		if i > 0 {
			w.WriteString(", ")
		}
		n.format(w)
	}
	w.WriteString(prep)
	w.identList(s.Roles)
}
