package adapter

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shardtail/shardtail/catalog"
	"github.com/shardtail/shardtail/expr"
	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/pgwire"
	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/sql"
)

// resolveName checks a (possibly qualified) object name against our single
// database and schema and returns the item name.
func resolveName(n sql.ObjectName) (string, error) {
	if n.Database != "" && n.Database != "materialize" {
		return "", errorf("3D000", "database %q does not exist", n.Database)
	}
	if n.Schema != "" && n.Schema != "public" {
		if n.Schema == "mz_internal" || n.Schema == "mz_catalog" || n.Schema == "pg_catalog" || n.Schema == "information_schema" {
			return n.Schema + "." + n.Name, nil
		}
		return "", errorf("3F000", "unknown schema '%s'", n.Schema)
	}
	return n.Name, nil
}

// lookup finds an item by name in the current catalog.
func (s *Session) lookup(n sql.ObjectName) (*catalog.Item, error) {
	name, err := resolveName(n)
	if err != nil {
		return nil, err
	}
	it := s.c.catalog.State().Items[name]
	if it == nil {
		return nil, errUnknownRelation(name)
	}
	return it, nil
}

func kindOf(k sql.ObjectKind) catalog.ItemKind {
	switch k {
	case sql.KindTable:
		return catalog.KindTable
	case sql.KindView:
		return catalog.KindView
	case sql.KindMaterializedView:
		return catalog.KindMaterializedView
	case sql.KindSource:
		return catalog.KindSource
	}
	return ""
}

// checkNewName fails when an item of that name exists.
func checkNewName(cs *catalog.State, name string) error {
	if _, ok := cs.Items[name]; ok {
		return errorf(codeDuplicateTable, "catalog item '%s' already exists", name)
	}
	return nil
}

func (s *Session) planCreateTable(st *sql.CreateTable) (*plan, error) {
	name, err := resolveName(st.Name)
	if err != nil {
		return nil, err
	}
	var schema row.Schema
	for _, c := range st.Columns {
		t, mod, err := expr.ColumnType(c.Type)
		if err != nil {
			return nil, err
		}
		if schema.Index(c.Name) >= 0 {
			return nil, errorf("42701", "column %q specified more than once", c.Name)
		}
		schema.Columns = append(schema.Columns, row.Column{Name: c.Name, Type: t, Nullable: !c.NotNull, Mod: mod})
	}
	retain, err := retainHistory(st.With, "CREATE TABLE ... WITH")
	if err != nil {
		return nil, err
	}
	return s.ddlPlan("CREATE TABLE", func(ctx context.Context) ([][]byte, error) {
		if _, ok := s.c.catalog.State().Items[name]; ok && st.IfNotExists {
			return [][]byte{notice("42P07", fmt.Sprintf("catalog item '%s' already exists, skipping", name), "")}, nil
		}
		_, err := s.c.createCollection(ctx, &catalog.Item{Name: name, Kind: catalog.KindTable, Schema: schema, Owner: s.user, RetainMs: retain})
		return nil, err
	}), nil
}

// ddlPlan wraps a DDL action: refused in transaction blocks, serialized with
// other DDL of this process, and sent upstream by proxy processes.
func (s *Session) ddlPlan(tag string, f func(ctx context.Context) ([][]byte, error)) *plan {
	return execOnly(func(ctx context.Context) (pgwire.Result, error) {
		if s.inBlock() {
			return nil, errorf(codeInvalidTxState, "%s cannot be run inside a transaction block", tag)
		}
		if s.c.isProxy() {
			return nil, errorf(codeReadOnlyTx, "%s is not served by a tail process", tag)
		}
		s.c.ddl.Lock()
		defer s.c.ddl.Unlock()
		if err := s.c.catalog.Refresh(ctx); err != nil {
			return nil, storageError(err)
		}
		msgs, err := f(ctx)
		if err != nil {
			return nil, storageError(err)
		}
		return command(tag, msgs...), nil
	})
}

// createCollection creates the item's shard (unless it is a view), records
// the item, and starts it. c.ddl must be held.
func (c *Coordinator) createCollection(ctx context.Context, it *catalog.Item) (*catalog.Item, error) {
	if err := checkNewName(c.catalog.State(), it.Name); err != nil {
		return nil, err
	}
	if it.Kind != catalog.KindView {
		it.Shard = persist.NewShardID()
		if _, err := c.persist.CreateShard(ctx, it.Shard, it.Schema); err != nil {
			return nil, fmt.Errorf("create shard: %w", err)
		}
		if it.Kind == catalog.KindTable {
			// Registered before the catalog names it: no reader, in any
			// process, meets the table unregistered.
			if err := c.storage.Register(ctx, it.Shard); err != nil {
				return nil, fmt.Errorf("register table shard: %w", err)
			}
		}
	}
	cs, err := c.catalog.Update(ctx, func(cs *catalog.State) error {
		if err := checkNewName(cs, it.Name); err != nil {
			return err
		}
		if _, ok := cs.Roles[it.Owner]; !ok {
			// A session whose role was dropped since it logged in: an
			// item of a missing owner would go to whichever role is
			// created next under its name.
			return errorf(codeUndefinedObject, "unknown role '%s'", it.Owner)
		}
		item := *it
		item.ID = cs.NextID
		cs.NextID++
		cs.Items[item.Name] = &item
		return nil
	})
	if err != nil {
		if it.Shard != "" {
			_ = c.persist.DropShard(context.WithoutCancel(ctx), it.Shard)
		}
		return nil, err
	}
	item := cs.Items[it.Name]
	if err := c.startItem(ctx, item); err != nil {
		return nil, err
	}
	return item, nil
}

func (s *Session) planCreateView(st *sql.CreateView) (*plan, error) {
	name, err := resolveName(st.Name)
	if err != nil {
		return nil, err
	}
	q, err := s.planQuery(st.Query, nil)
	if err != nil {
		return nil, err
	}
	schema := q.schema()
	if st.Columns != nil {
		if len(st.Columns) != len(schema.Columns) {
			return nil, errorf("42601", "view %q has %d columns but %d names were given", name, len(schema.Columns), len(st.Columns))
		}
		for i, c := range st.Columns {
			schema.Columns[i].Name = c
		}
	}
	if err := schema.Validate(); err != nil {
		return nil, errorf("42701", "%v", err)
	}
	kind, tag := catalog.KindView, "CREATE VIEW"
	if st.Materialized {
		kind, tag = catalog.KindMaterializedView, "CREATE MATERIALIZED VIEW"
		if q.input == nil {
			// Its maintenance dataflow follows an input shard.
			return nil, errorf(codeFeatureNotSupp, "materialized views that read no collection are not supported yet")
		}
	}
	retain, err := retainHistory(st.With, tag+" ... WITH")
	if err != nil {
		return nil, err
	}
	// A view of a constant (VALUES) depends on no collection.
	var deps []uint64
	if q.from != nil {
		deps = []uint64{q.from.ID}
	}
	return s.ddlPlan(tag, func(ctx context.Context) ([][]byte, error) {
		if _, ok := s.c.catalog.State().Items[name]; ok && st.IfNotExists {
			return [][]byte{notice("42P07", fmt.Sprintf("catalog item '%s' already exists, skipping", name), "")}, nil
		}
		_, err := s.c.createCollection(ctx, &catalog.Item{Name: name, Kind: kind, Schema: schema, SQL: st.String(),
			DependsOn: deps, Owner: s.user, RetainMs: retain})
		return nil, err
	}), nil
}

func (s *Session) planDrop(st *sql.Drop) (*plan, error) {
	if st.Kind == sql.KindRole {
		return s.ddlPlan("DROP ROLE", func(ctx context.Context) ([][]byte, error) {
			var msgs [][]byte
			_, err := s.c.catalog.Update(ctx, func(cs *catalog.State) error {
				msgs = nil
				if err := checkDropRole(cs, s.user, nil); err != nil {
					return err
				}
				for _, n := range st.Names {
					target, ok := cs.Roles[n.Name]
					if !ok {
						if st.IfExists {
							msgs = append(msgs, notice("00000", fmt.Sprintf("role %q does not exist, skipping", n.Name), ""))
							continue
						}
						return errorf(codeUndefinedObject, "unknown role '%s'", n.Name)
					}
					if n.Name == defaultRole || n.Name == s.user {
						return errorf(codeInsufficientPriv, "current role cannot be dropped")
					}
					if err := checkDropRole(cs, s.user, target); err != nil {
						return err
					}
					if err := checkRoleUnused(cs, n.Name); err != nil {
						return err
					}
					delete(cs.Roles, n.Name)
				}
				return nil
			})
			return msgs, err
		}), nil
	}
	kind := kindOf(st.Kind)
	tag := "DROP " + st.Kind.String()
	return s.ddlPlan(tag, func(ctx context.Context) ([][]byte, error) {
		var msgs [][]byte
		var drop []*catalog.Item
		cs := s.c.catalog.State()
		for _, n := range st.Names {
			name, err := resolveName(n)
			if err != nil {
				return nil, err
			}
			it := cs.Items[name]
			if it == nil {
				if st.IfExists {
					msgs = append(msgs, notice("00000", fmt.Sprintf("unknown catalog item '%s', skipping", name), ""))
					continue
				}
				return nil, errUnknownRelation(name)
			}
			if it.Kind != kind {
				return nil, errorf(codeWrongObjectType, "%s is a %s not a %s", qualified(name), it.Kind, kind)
			}
			if err := s.checkOwner(it); err != nil {
				return nil, err
			}
			deps := cs.Dependents(it.ID)
			if len(deps) > 0 && !st.Cascade {
				return nil, &Error{Code: codeDependentObjects, Message: fmt.Sprintf("cannot drop %s: still depended upon by %s %s", qualified(name), deps[0].Kind, qualified(deps[0].Name)),
					hint: "Use DROP ... CASCADE to drop the dependent objects too."}
			}
			drop = append(drop, deps...)
			drop = append(drop, it)
		}
		return msgs, s.c.dropItems(ctx, drop)
	}), nil
}

// dropItems removes items (dependents first) from the catalog, stops their
// dataflows and tombstones their shards, which ends their subscribers; the
// finalizer deletes the shards' data later.
func (c *Coordinator) dropItems(ctx context.Context, items []*catalog.Item) error {
	if len(items) == 0 {
		return nil
	}
	// Listed before the commit, so that a crash after it cannot leak the
	// shards' data (see finalize.go).
	var shards []string
	for _, it := range items {
		if it.Shard != "" {
			shards = append(shards, it.Shard)
		}
	}
	if err := c.finalizer.Add(ctx, shards); err != nil {
		return err
	}
	if _, err := c.catalog.Update(ctx, func(cs *catalog.State) error {
		for _, it := range items {
			delete(cs.Items, it.Name)
		}
		return nil
	}); err != nil {
		return err
	}
	for _, it := range items {
		c.stopItem(it)
		if it.Shard != "" {
			if err := c.persist.DropShard(ctx, it.Shard); err != nil {
				c.log.Warn("drop: tombstone shard", "item", it.Name, "err", err)
			}
		}
	}
	return nil
}

func (s *Session) planAlter(st *sql.AlterObject) (*plan, error) {
	var retain *int64
	if st.Reset {
		for _, o := range st.Options {
			if o.Name != "RETAIN HISTORY" {
				return nil, errorf(codeFeatureNotSupp, "ALTER ... RESET (%s) not supported", o.Name)
			}
			ms := int64(catalog.DefaultRetainMs)
			retain = &ms
		}
	} else if len(st.Options) > 0 {
		ms, err := retainHistory(st.Options, "ALTER ... SET")
		if err != nil {
			return nil, err
		}
		retain = &ms
	}
	tag := "ALTER " + st.Kind.String()
	return s.ddlPlan(tag, func(ctx context.Context) ([][]byte, error) {
		name, err := resolveName(st.Name)
		if err != nil {
			return nil, err
		}
		it := s.c.catalog.State().Items[name]
		if it == nil {
			if st.IfExists {
				return [][]byte{notice("00000", fmt.Sprintf("unknown catalog item '%s', skipping", name), "")}, nil
			}
			return nil, errUnknownRelation(name)
		}
		if err := s.checkOwner(it); err != nil {
			return nil, err
		}
		if retain == nil {
			return nil, nil
		}
		if _, err := s.c.catalog.Update(ctx, func(cs *catalog.State) error {
			cur := cs.Items[name]
			if cur == nil {
				return errUnknownRelation(name)
			}
			n := *cur
			n.RetainMs = *retain
			cs.Items[name] = &n
			return nil
		}); err != nil {
			return nil, err
		}
		if it.Shard != "" {
			s.c.storage.SetRetain(it.Shard, *retain)
		}
		return nil, nil
	}), nil
}

// retainHistory is the RETAIN HISTORY window, in milliseconds, that the
// options of a CREATE ... WITH or an ALTER ... SET (where) set, and the
// default window when they set none.
func retainHistory(opts []sql.Option, where string) (int64, error) {
	ms := int64(catalog.DefaultRetainMs)
	for _, o := range opts {
		if o.Name != "RETAIN HISTORY" {
			return 0, errorf(codeFeatureNotSupp, "%s (%s) not supported", where, o.Name)
		}
		text, ok := sql.ValueText(o.Value)
		if !ok {
			return 0, errorf(codeInvalidParamValue, "RETAIN HISTORY requires an interval")
		}
		d, err := parseInterval(text)
		if err != nil {
			return 0, err
		}
		if ms = d.Milliseconds(); ms < 0 {
			return 0, errorf(codeInvalidParamValue, "RETAIN HISTORY must not be negative")
		}
	}
	return ms, nil
}

// parseInterval parses an interval literal as RETAIN HISTORY and TIMEOUT
// take it: '1s', '500ms', '5 minutes', '1h', '00:01:00', '1 day'.
func parseInterval(text string) (time.Duration, error) {
	t := strings.TrimSpace(strings.ToLower(text))
	if d, err := time.ParseDuration(strings.ReplaceAll(t, " ", "")); err == nil {
		return d, nil
	}
	if parts := strings.Split(t, ":"); len(parts) == 3 {
		if d, err := time.ParseDuration(parts[0] + "h" + parts[1] + "m" + parts[2] + "s"); err == nil {
			return d, nil
		}
	}
	var total time.Duration
	fields := strings.Fields(t)
	if len(fields) == 0 || len(fields)%2 != 0 {
		return 0, errorf("22007", "invalid input syntax for type interval: %q", text)
	}
	for i := 0; i < len(fields); i += 2 {
		var n float64
		if _, err := fmt.Sscanf(fields[i], "%g", &n); err != nil {
			return 0, errorf("22007", "invalid input syntax for type interval: %q", text)
		}
		unit := strings.TrimSuffix(fields[i+1], "s")
		var d time.Duration
		switch unit {
		case "microsecond", "us":
			d = time.Microsecond
		case "millisecond", "m":
			d = time.Millisecond
		case "second", "sec":
			d = time.Second
		case "minute", "min":
			d = time.Minute
		case "hour", "hr", "h":
			d = time.Hour
		case "day", "d":
			d = 24 * time.Hour
		case "week":
			d = 7 * 24 * time.Hour
		default:
			return 0, errorf("22007", "invalid input syntax for type interval: %q", text)
		}
		total += time.Duration(n * float64(d))
	}
	return total, nil
}

func (s *Session) planCreateRole(st *sql.CreateRole) (*plan, error) {
	if st.Name == "public" {
		// Grants to PUBLIC are stored under this name.
		return nil, errorf(codeReservedName, "role name %q is reserved", st.Name)
	}
	role := &catalog.Role{Name: st.Name}
	if err := applyRoleOptions(role, st.Options); err != nil {
		return nil, err
	}
	return s.ddlPlan("CREATE ROLE", func(ctx context.Context) ([][]byte, error) {
		msgs := emptyPasswordNotice(st.Options)
		_, err := s.c.catalog.Update(ctx, func(cs *catalog.State) error {
			if err := checkCreateRole(cs, s.user, st.Options); err != nil {
				return err
			}
			if _, ok := cs.Roles[role.Name]; ok {
				return errorf(codeDuplicateObject, "role '%s' already exists", role.Name)
			}
			r := *role
			cs.Roles[r.Name] = &r
			return nil
		})
		return msgs, err
	}), nil
}

func (s *Session) planAlterRole(st *sql.AlterRole) (*plan, error) {
	return s.ddlPlan("ALTER ROLE", func(ctx context.Context) ([][]byte, error) {
		msgs := emptyPasswordNotice(st.Options)
		_, err := s.c.catalog.Update(ctx, func(cs *catalog.State) error {
			cur, ok := cs.Roles[st.Name]
			if !ok {
				return errorf(codeUndefinedObject, "unknown role '%s'", st.Name)
			}
			if err := checkAlterRole(cs, s.user, cur, st.Options); err != nil {
				return err
			}
			r := *cur
			if err := applyRoleOptions(&r, st.Options); err != nil {
				return err
			}
			cs.Roles[r.Name] = &r
			return nil
		})
		return msgs, err
	}), nil
}

// emptyPasswordNotice is PostgreSQL's notice for an empty PASSWORD string,
// which sets no password but clears it.
func emptyPasswordNotice(opts []sql.Option) [][]byte {
	for _, o := range opts {
		if pw, ok := sql.ValueText(o.Value); ok && o.Name == "PASSWORD" && pw == "" {
			return [][]byte{notice("00000", "empty string is not a valid password, clearing password", "")}
		}
	}
	return nil
}

func applyRoleOptions(r *catalog.Role, opts []sql.Option) error {
	for _, o := range opts {
		switch o.Name {
		case "LOGIN":
			r.Login = true
		case "NOLOGIN":
			r.Login = false
		case "SUPERUSER":
			r.Superuser = true
		case "NOSUPERUSER":
			r.Superuser = false
		case "PASSWORD":
			if _, isNull := o.Value.(*sql.NullLit); isNull || o.Value == nil {
				r.Verifier = ""
				continue
			}
			pw, ok := sql.ValueText(o.Value)
			if !ok {
				return errorf(codeInvalidParamValue, "PASSWORD requires a string")
			}
			if pw == "" {
				// No password, as PostgreSQL takes it (emptyPasswordNotice):
				// --require-password then refuses the role.
				r.Verifier = ""
				continue
			}
			r.Verifier = pgwire.NewSCRAMVerifier(pw)
		case "CONNECTION LIMIT":
			if err := setConnLimit(r, o); err != nil {
				return err
			}
		case "CREATEROLE":
			r.CreateRole = true
		case "NOCREATEROLE":
			r.CreateRole = false
		case "INHERIT", "NOINHERIT", "CREATEDB", "NOCREATEDB":
		default:
			return errorf(codeFeatureNotSupp, "role option %s not supported", o.Name)
		}
	}
	return nil
}

// setConnLimit applies CONNECTION LIMIT n: -1 lifts the limit, as in
// Postgres, and anything below is refused with Postgres's message.
func setConnLimit(r *catalog.Role, o sql.Option) error {
	text, _ := sql.ValueText(o.Value)
	n, err := strconv.Atoi(text)
	if err != nil || n < -1 {
		return errorf(codeInvalidParamValue, "invalid connection limit: %s", text)
	}
	if n == -1 {
		r.ConnLimit = nil
		return nil
	}
	r.ConnLimit = &n
	return nil
}

func (s *Session) planGrant(st *sql.Grant) (*plan, error) {
	tag := "GRANT"
	if st.Revoke {
		tag = "REVOKE"
	}
	return s.ddlPlan(tag, func(ctx context.Context) ([][]byte, error) {
		_, err := s.c.catalog.Update(ctx, func(cs *catalog.State) error {
			for _, n := range st.Objects {
				name, err := resolveName(n)
				if err != nil {
					return err
				}
				cur := cs.Items[name]
				if cur == nil {
					return errUnknownRelation(name)
				}
				if err := s.checkOwner(cur); err != nil {
					return err
				}
				it := *cur
				it.Grants = map[string][]string{}
				for k, v := range cur.Grants {
					it.Grants[k] = slices.Clone(v)
				}
				for _, role := range st.Roles {
					if _, ok := cs.Roles[role]; !ok && role != "public" {
						return errorf(codeUndefinedObject, "unknown role '%s'", role)
					}
					for _, p := range expandPrivileges(st.Privileges) {
						has := slices.Contains(it.Grants[role], p)
						switch {
						case st.Revoke && has:
							it.Grants[role] = slices.DeleteFunc(it.Grants[role], func(x string) bool { return x == p })
						case !st.Revoke && !has:
							it.Grants[role] = append(it.Grants[role], p)
						}
					}
				}
				cs.Items[name] = &it
			}
			return nil
		})
		return nil, err
	}), nil
}

func expandPrivileges(ps []string) []string {
	var out []string
	for _, p := range ps {
		if p == "ALL" || p == "ALL PRIVILEGES" {
			out = append(out, "SELECT", "INSERT", "UPDATE", "DELETE")
			continue
		}
		out = append(out, p)
	}
	return out
}

func (s *Session) planShowObjects(st *sql.ShowObjects) (*plan, error) {
	kind := kindOf(st.Kind)
	var cols []row.Column
	switch kind {
	case catalog.KindSource:
		cols = []row.Column{{Name: "name", Type: row.TypeText}, {Name: "type", Type: row.TypeText}, {Name: "cluster", Type: row.TypeText, Nullable: true}, {Name: "comment", Type: row.TypeText}}
	case catalog.KindMaterializedView:
		cols = []row.Column{{Name: "name", Type: row.TypeText}, {Name: "cluster", Type: row.TypeText}, {Name: "comment", Type: row.TypeText}}
	default:
		cols = []row.Column{{Name: "name", Type: row.TypeText}, {Name: "comment", Type: row.TypeText}}
	}
	return rowsPlan(cols, func() ([]row.Row, error) {
		var rows []row.Row
		for _, it := range s.c.catalog.State().SortedItems() {
			if it.Kind != kind || strings.Contains(it.Name, ".") {
				continue
			}
			switch kind {
			case catalog.KindSource:
				rows = append(rows, row.Row{it.Name, "load-generator", "quickstart", ""})
			case catalog.KindMaterializedView:
				rows = append(rows, row.Row{it.Name, "quickstart", ""})
			default:
				rows = append(rows, row.Row{it.Name, ""})
			}
		}
		slices.SortFunc(rows, func(a, b row.Row) int { return strings.Compare(a[0].(string), b[0].(string)) })
		return rows, nil
	}), nil
}

func (s *Session) planShowColumns(st *sql.ShowColumns) (*plan, error) {
	it, err := s.lookup(st.Table)
	if err != nil {
		return nil, err
	}
	cols := []row.Column{{Name: "name", Type: row.TypeText}, {Name: "nullable", Type: row.TypeBool}, {Name: "type", Type: row.TypeText}, {Name: "comment", Type: row.TypeText}}
	return rowsPlan(cols, func() ([]row.Row, error) {
		var rows []row.Row
		for _, c := range it.Schema.Columns {
			rows = append(rows, row.Row{c.Name, c.Nullable, shortTypeName(c), ""})
		}
		return rows, nil
	}), nil
}

// shortTypeName is the type name SHOW COLUMNS prints (Materialize's),
// with the column's modifier.
func shortTypeName(c row.Column) string {
	if c.Mod.Set {
		return c.TypeName()
	}
	switch c.Type {
	case row.TypeInt2:
		return "smallint"
	case row.TypeInt4:
		return "integer"
	case row.TypeInt8:
		return "bigint"
	case row.TypeTimestamp:
		return "timestamp without time zone"
	case row.TypeTimestampTZ:
		return "timestamp with time zone"
	}
	return c.Type.String()
}

func (s *Session) planShowCreate(st *sql.ShowCreate) (*plan, error) {
	it, err := s.lookup(st.Name)
	if err != nil {
		return nil, err
	}
	cols := []row.Column{{Name: "name", Type: row.TypeText}, {Name: "create_sql", Type: row.TypeText}}
	return rowsPlan(cols, func() ([]row.Row, error) {
		text := it.SQL
		if text == "" {
			var defs []string
			for _, c := range it.Schema.Columns {
				d := sql.QuoteIdent(c.Name) + " " + c.TypeName()
				if !c.Nullable {
					d += " NOT NULL"
				}
				defs = append(defs, d)
			}
			text = fmt.Sprintf("CREATE TABLE %s (%s)", qualified(sql.QuoteIdent(it.Name)), strings.Join(defs, ", "))
		}
		return []row.Row{{qualified(it.Name), text}}, nil
	}), nil
}
