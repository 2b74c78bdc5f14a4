package adapter

import (
	"context"
	"slices"

	"github.com/shardtail/shardtail/pgwire"
	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/sql"
)

// plan is a statement ready to run: what Describe reports, and how to
// execute it with parameter values and result formats. Planning resolves
// names against the catalog as of planning.
type plan struct {
	fields []pgwire.Field
	// params are the parameter type OIDs the statement inferred.
	params []uint32
	exec   func(ctx context.Context, params []row.Datum, formats []int16) (pgwire.Result, error)
}

// paramOIDs merges the client's parameter types with the inferred ones.
func (p *plan) paramOIDs(client []uint32) []uint32 {
	n := max(len(client), len(p.params))
	out := make([]uint32, n)
	for i := range out {
		if i < len(p.params) {
			out[i] = p.params[i]
		}
		if i < len(client) && client[i] != 0 {
			out[i] = client[i]
		}
		if out[i] == 0 {
			out[i] = 25 // text
		}
	}
	return out
}

// execOnly is a plan without rows or parameters.
func execOnly(f func(ctx context.Context) (pgwire.Result, error)) *plan {
	return &plan{exec: func(ctx context.Context, _ []row.Datum, _ []int16) (pgwire.Result, error) { return f(ctx) }}
}

// rowsPlan is a plan returning rows computed at execution.
func rowsPlan(cols []row.Column, rows func() ([]row.Row, error)) *plan {
	return &plan{fields: fieldsOf(cols), exec: func(ctx context.Context, _ []row.Datum, formats []int16) (pgwire.Result, error) {
		rs, err := rows()
		if err != nil {
			return nil, err
		}
		return newRowsResult(cols, formats, sliceSource(rs)), nil
	}}
}

// plan plans one statement. paramOIDs are the client's parameter types
// (extended protocol), nil for the simple protocol.
func (s *Session) plan(ctx context.Context, st sql.Statement, paramOIDs []uint32) (*plan, error) {
	if s.tx == txFailed && !isTxEnd(st) {
		return nil, errInFailedTx
	}
	switch st := st.(type) {
	case *sql.Begin:
		return execOnly(func(ctx context.Context) (pgwire.Result, error) {
			if s.inBlock() {
				return command("BEGIN", notice("25001", "there is already a transaction in progress", "")), nil
			}
			s.tx = txBlock
			s.saveVars().saved = slices.Clone(s.vars)
			s.varsSaved = true
			return command("BEGIN"), nil
		}), nil
	case *sql.Commit:
		return execOnly(func(ctx context.Context) (pgwire.Result, error) {
			switch s.tx {
			case txIdle, txImplicit:
				// As in PostgreSQL, an implicit transaction's writes
				// (a multi-statement query's, an extended-protocol
				// batch's) commit.
				if err := s.commit(ctx); err != nil {
					return nil, err
				}
				return command("COMMIT", notice("25P01", "there is no transaction in progress", "")), nil
			case txFailed:
				s.rollback()
				return command("ROLLBACK"), nil
			}
			if err := s.commit(ctx); err != nil {
				return nil, err
			}
			return command("COMMIT"), nil
		}), nil
	case *sql.Rollback:
		return execOnly(func(ctx context.Context) (pgwire.Result, error) {
			if !s.inBlock() {
				s.endTx()
				return command("ROLLBACK", notice("25P01", "there is no transaction in progress", "")), nil
			}
			s.rollback()
			return command("ROLLBACK"), nil
		}), nil
	case *sql.SetTransaction:
		return execOnly(func(ctx context.Context) (pgwire.Result, error) { return command("SET"), nil }), nil
	case *sql.SetVariable:
		return s.planSet(ctx, st)
	case *sql.ResetVariable:
		return s.planReset(st)
	case *sql.ShowVariable:
		return s.planShowVar(st)
	case *sql.ShowObjects:
		return s.planShowObjects(st)
	case *sql.ShowColumns:
		return s.planShowColumns(st)
	case *sql.ShowCreate:
		return s.planShowCreate(st)
	case *sql.Discard:
		return execOnly(func(ctx context.Context) (pgwire.Result, error) {
			if st.Target == "ALL" {
				s.closeCursors()
				s.vars = nil
			}
			return command("DISCARD " + st.Target), nil
		}), nil
	case *sql.Deallocate:
		return execOnly(func(ctx context.Context) (pgwire.Result, error) { return command("DEALLOCATE"), nil }), nil
	case *sql.CreateTable:
		return s.planCreateTable(st)
	case *sql.CreateView:
		return s.planCreateView(st)
	case *sql.CreateSource:
		return s.planCreateSource(st)
	case *sql.Drop:
		return s.planDrop(st)
	case *sql.AlterObject:
		return s.planAlter(st)
	case *sql.CreateRole:
		return s.planCreateRole(st)
	case *sql.AlterRole:
		return s.planAlterRole(st)
	case *sql.Grant:
		return s.planGrant(st)
	case *sql.Insert:
		return s.planInsert(st, paramOIDs)
	case *sql.Update:
		return s.planUpdate(st, paramOIDs)
	case *sql.Delete:
		return s.planDelete(st, paramOIDs)
	case *sql.Copy:
		return s.planCopy(st)
	case *sql.Select:
		return s.planSelect(ctx, st, paramOIDs)
	case *sql.Subscribe:
		return s.planSubscribe(st, paramOIDs)
	case *sql.DeclareCursor:
		return s.planDeclare(st, paramOIDs)
	case *sql.Fetch:
		return s.planFetch(st)
	case *sql.CloseCursor:
		return s.planClose(st)
	}
	return nil, errorf(codeFeatureNotSupp, "statement not supported: %s", st)
}
