package expr

import (
	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/sql"
)

// EvalConst evaluates a constant expression, converted to want with
// assignment rules: AS OF and UP TO (TypeMzTimestamp: 1700000000000,
// now() - interval '1 minute', '2024-01-01 00:00:00+00'), FETCH ... WITH
// (TIMEOUT = '1s') and RETAIN HISTORY FOR '1h' (TypeInterval, see
// IntervalDuration), LIMIT and OFFSET (TypeInt8). TypeInvalid keeps the
// expression's own type (unknown becomes text). ctx gives parameter values
// and the timestamp of now(); it may be nil when neither is used. Column
// references fail with 42703.
func EvalConst(e sql.Expr, want Type, ctx *EvalContext) (row.Datum, error) {
	x, err := CompileConst(e, want, &Scope{})
	if err != nil {
		return nil, err
	}
	return x.Eval(ctx, nil)
}

// CompileConst compiles a constant expression as EvalConst evaluates it,
// for a statement that evaluates it each time it runs (a prepared
// statement's LIMIT $1 or AS OF $1): scope holds the parameter types the
// rest of the statement declared or inferred, and a parameter whose type
// nothing determined takes want's (an mz_timestamp is described as
// numeric, its Rep). Evaluate the result with a nil row.
func CompileConst(e sql.Expr, want Type, scope *Scope) (Expr, error) {
	c := &compiler{scope: scope}
	x, err := c.expr(e)
	if err != nil {
		return nil, err
	}
	if want == TypeInvalid {
		return c.resolveUnknown(x)
	}
	return c.castTo(x, typeRef{typ: want}, castAssignment)
}
