package expr

import (
	"cmp"
	"strings"

	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/sql"
)

// opSig is one signature of a binary operator: its operand types, result
// type and strict implementation.
type opSig struct {
	l, r, ret Type
	fn        func(a, b row.Datum) (row.Datum, error)
	nullable  bool // may return NULL for non-NULL operands
}

// binaryOps lists the signatures of the arithmetic, bitwise, concatenation
// and jsonb operators, in order of preference: when two candidates fit
// equally well, the first wins (float8 before numeric, as Postgres prefers
// float8 within the numeric category).
var binaryOps = map[sql.BinaryOp][]opSig{}

// unaryMinus maps a type to its negation.
var unaryMinus = map[Type]func(row.Datum) (row.Datum, error){}

func addOp(op sql.BinaryOp, l, r, ret Type, fn func(a, b row.Datum) (row.Datum, error)) {
	binaryOps[op] = append(binaryOps[op], opSig{l: l, r: r, ret: ret, fn: fn})
}

func init() {
	arith := []sql.BinaryOp{sql.OpPlus, sql.OpMinus, sql.OpMul, sql.OpDiv, sql.OpMod}
	bitOps := map[sql.BinaryOp]byte{sql.OpBitAnd: '&', sql.OpBitOr: '|', sql.OpBitXor: '#'}
	for _, op := range arith {
		c := string(op)[0]
		addOp(op, TypeInt2, TypeInt2, TypeInt2, intOp[int16](c))
		addOp(op, TypeInt4, TypeInt4, TypeInt4, intOp[int32](c))
		addOp(op, TypeInt8, TypeInt8, TypeInt8, intOp[int64](c))
		if op != sql.OpMod {
			addOp(op, TypeFloat4, TypeFloat4, TypeFloat4, floatOp[float32](c))
			addOp(op, TypeFloat8, TypeFloat8, TypeFloat8, floatOp[float64](c))
		}
		addOp(op, TypeNumeric, TypeNumeric, TypeNumeric, numericOp(c))
	}
	for op, c := range bitOps {
		addOp(op, TypeInt2, TypeInt2, TypeInt2, intBitOp[int16](c))
		addOp(op, TypeInt4, TypeInt4, TypeInt4, intBitOp[int32](c))
		addOp(op, TypeInt8, TypeInt8, TypeInt8, intBitOp[int64](c))
	}
	for op, c := range map[sql.BinaryOp]byte{sql.OpShiftLeft: '<', sql.OpShiftRight: '>'} {
		addOp(op, TypeInt2, TypeInt4, TypeInt2, intBitOp[int16](c))
		addOp(op, TypeInt4, TypeInt4, TypeInt4, intBitOp[int32](c))
		addOp(op, TypeInt8, TypeInt4, TypeInt8, intBitOp[int64](c))
	}
	addOp(sql.OpPow, TypeFloat8, TypeFloat8, TypeFloat8, floatPow)
	addOp(sql.OpPow, TypeNumeric, TypeNumeric, TypeNumeric, numericPow)

	// Date and time arithmetic.
	addOp(sql.OpPlus, TypeTimestamp, TypeInterval, TypeTimestamp, tsPlusInterval(TypeTimestamp, 1))
	addOp(sql.OpPlus, TypeTimestampTZ, TypeInterval, TypeTimestampTZ, tsPlusInterval(TypeTimestampTZ, 1))
	addOp(sql.OpPlus, TypeInterval, TypeTimestamp, TypeTimestamp, swap(tsPlusInterval(TypeTimestamp, 1)))
	addOp(sql.OpPlus, TypeInterval, TypeTimestampTZ, TypeTimestampTZ, swap(tsPlusInterval(TypeTimestampTZ, 1)))
	addOp(sql.OpPlus, TypeDate, TypeInt4, TypeDate, datePlusDays(1))
	addOp(sql.OpPlus, TypeInt4, TypeDate, TypeDate, swap(datePlusDays(1)))
	addOp(sql.OpPlus, TypeDate, TypeInterval, TypeTimestamp, datePlusInterval(1))
	addOp(sql.OpPlus, TypeInterval, TypeDate, TypeTimestamp, swap(datePlusInterval(1)))
	addOp(sql.OpPlus, TypeInterval, TypeInterval, TypeInterval, func(a, b row.Datum) (row.Datum, error) {
		return addInterval(a.(Interval), b.(Interval))
	})
	addOp(sql.OpMinus, TypeTimestamp, TypeInterval, TypeTimestamp, tsPlusInterval(TypeTimestamp, -1))
	addOp(sql.OpMinus, TypeTimestampTZ, TypeInterval, TypeTimestampTZ, tsPlusInterval(TypeTimestampTZ, -1))
	addOp(sql.OpMinus, TypeTimestamp, TypeTimestamp, TypeInterval, tsMinusTs)
	addOp(sql.OpMinus, TypeTimestampTZ, TypeTimestampTZ, TypeInterval, tsMinusTs)
	addOp(sql.OpMinus, TypeDate, TypeInt4, TypeDate, datePlusDays(-1))
	addOp(sql.OpMinus, TypeDate, TypeDate, TypeInt4, dateMinusDate)
	addOp(sql.OpMinus, TypeDate, TypeInterval, TypeTimestamp, datePlusInterval(-1))
	addOp(sql.OpMinus, TypeInterval, TypeInterval, TypeInterval, func(a, b row.Datum) (row.Datum, error) {
		n, err := negInterval(b.(Interval))
		if err != nil {
			return nil, err
		}
		return addInterval(a.(Interval), n)
	})
	addOp(sql.OpMul, TypeInterval, TypeFloat8, TypeInterval, func(a, b row.Datum) (row.Datum, error) {
		return mulInterval(a.(Interval), b.(float64))
	})
	addOp(sql.OpMul, TypeFloat8, TypeInterval, TypeInterval, func(a, b row.Datum) (row.Datum, error) {
		return mulInterval(b.(Interval), a.(float64))
	})
	addOp(sql.OpDiv, TypeInterval, TypeFloat8, TypeInterval, func(a, b row.Datum) (row.Datum, error) {
		return divInterval(a.(Interval), b.(float64))
	})

	// Concatenation of text with anything is handled in compileConcat.
	addOp(sql.OpConcat, TypeText, TypeText, TypeText, func(a, b row.Datum) (row.Datum, error) {
		return a.(string) + b.(string), nil
	})
	addOp(sql.OpConcat, TypeBytea, TypeBytea, TypeBytea, func(a, b row.Datum) (row.Datum, error) {
		x, y := a.([]byte), b.([]byte)
		return append(append(make([]byte, 0, len(x)+len(y)), x...), y...), nil
	})
	addOp(sql.OpConcat, TypeJSONB, TypeJSONB, TypeJSONB, jsonbConcat)

	binaryOps[sql.OpJSONGet] = []opSig{
		{l: TypeJSONB, r: TypeText, ret: TypeJSONB, fn: jsonbGetKey(false), nullable: true},
		{l: TypeJSONB, r: TypeInt4, ret: TypeJSONB, fn: jsonbGetIndex(false), nullable: true},
	}
	binaryOps[sql.OpJSONGetText] = []opSig{
		{l: TypeJSONB, r: TypeText, ret: TypeText, fn: jsonbGetKey(true), nullable: true},
		{l: TypeJSONB, r: TypeInt4, ret: TypeText, fn: jsonbGetIndex(true), nullable: true},
	}
	addOp(sql.OpContains, TypeJSONB, TypeJSONB, TypeBool, jsonbContains)
	addOp(sql.OpMinus, TypeJSONB, TypeText, TypeJSONB, jsonbDeleteKey)
	addOp(sql.OpMinus, TypeJSONB, TypeInt4, TypeJSONB, jsonbDeleteIndex)
	addOp(sql.OpContainedBy, TypeJSONB, TypeJSONB, TypeBool, swap(jsonbContains))

	unaryMinus[TypeInt2] = intNeg[int16]
	unaryMinus[TypeInt4] = intNeg[int32]
	unaryMinus[TypeInt8] = intNeg[int64]
	unaryMinus[TypeFloat4] = func(a row.Datum) (row.Datum, error) { return -a.(float32), nil }
	unaryMinus[TypeFloat8] = func(a row.Datum) (row.Datum, error) { return -a.(float64), nil }
	unaryMinus[TypeNumeric] = numericNeg
	unaryMinus[TypeInterval] = func(a row.Datum) (row.Datum, error) { return negInterval(a.(Interval)) }
}

func swap(f func(a, b row.Datum) (row.Datum, error)) func(a, b row.Datum) (row.Datum, error) {
	return func(a, b row.Datum) (row.Datum, error) { return f(b, a) }
}

// arithType is the type two numeric-category operands are computed in:
// the wider of the two, except that real with an integer or numeric is
// double precision, as Postgres resolves it through its mixed float
// operators.
func arithType(l, r Type) Type {
	if (l == TypeFloat4 && !r.isFloat()) || (r == TypeFloat4 && !l.isFloat()) {
		return TypeFloat8
	}
	if l.rank() >= r.rank() {
		return l
	}
	return r
}

// preferred reports Postgres' preferred type of each category, which wins
// ties between operator candidates.
func preferred(t Type) bool {
	return t == TypeFloat8 || t == TypeText || t == TypeTimestampTZ || t == TypeInterval
}

// resolveOp picks the signature of op for operand types lt and rt, as
// Postgres' operator resolution does: an exact match (an unknown operand
// taking the other's type); for two numbers, the signature of their
// common type; else the candidate reachable by implicit casts with the
// most exact matches, ties going to text for unknown operands and then to
// preferred types.
func resolveOp(op sql.BinaryOp, lt, rt Type) (*opSig, error) {
	sigs := binaryOps[op]
	if len(sigs) == 0 {
		return nil, errf(CodeFeatureNotSupported, "operator %s is not supported yet", op)
	}
	el, er := lt, rt
	if el == TypeUnknown {
		el = er
	}
	if er == TypeUnknown {
		er = el
	}
	for i := range sigs {
		if sigs[i].l == el && sigs[i].r == er {
			return &sigs[i], nil
		}
	}
	cands := make([][]Type, len(sigs))
	for i := range sigs {
		cands[i] = []Type{sigs[i].l, sigs[i].r}
	}
	if lt == TypeUnknown && polyOps[op] {
		// Postgres has these for json and jsonb (and arrays, ranges):
		// an untyped left operand is ambiguous if any fits.
		if op != sql.OpContains && op != sql.OpContainedBy && pickCandidate([]Type{lt, rt}, cands) == -1 {
			return nil, errOperator(string(op), lt, rt)
		}
		return nil, errNotUnique(op, lt, rt)
	}
	if el.category() == catNumeric && er.category() == catNumeric {
		t := arithType(el, er)
		for i := range sigs {
			if sigs[i].l == t && sigs[i].r == t {
				return &sigs[i], nil
			}
		}
	}
	switch i := pickCandidate([]Type{lt, rt}, cands); i {
	case -1:
		return nil, errOperator(string(op), lt, rt)
	case -2:
		return nil, errNotUnique(op, lt, rt)
	default:
		return &sigs[i], nil
	}
}

// polyOps are operators Postgres defines for several container types.
var polyOps = map[sql.BinaryOp]bool{
	sql.OpJSONGet: true, sql.OpJSONGetText: true, sql.OpContains: true, sql.OpContainedBy: true,
	sql.OpJSONPath: true, sql.OpJSONPathText: true,
}

func errNotUnique(op sql.BinaryOp, lt, rt Type) *Error {
	return &Error{code: CodeAmbiguousFunction, msg: "operator is not unique: " + lt.String() + " " + string(op) + " " + rt.String(),
		hint: "Could not choose a best candidate operator. You might need to add explicit type casts."}
}

// comparator returns the SQL order of values of type t, or nil if t has
// no ordering shardtail implements. Text compares bytewise (collation C).
func comparator(t Type) func(a, b row.Datum) int {
	switch t {
	case TypeInt4:
		return func(a, b row.Datum) int { return cmp.Compare(a.(int32), b.(int32)) }
	case TypeInt8:
		return func(a, b row.Datum) int { return cmp.Compare(a.(int64), b.(int64)) }
	case TypeText, TypeUnknown:
		return func(a, b row.Datum) int { return strings.Compare(a.(string), b.(string)) }
	case TypeInterval:
		return func(a, b row.Datum) int { return a.(Interval).Compare(b.(Interval)) }
	case TypeMzTimestamp:
		return func(a, b row.Datum) int { return cmp.Compare(a.(uint64), b.(uint64)) }
	case TypeJSONB:
		return jsonbCompare
	}
	if t.IsRow() {
		return row.CompareSQL
	}
	return nil
}

// compareType is the type two operands of a comparison are compared in.
func compareType(op string, lt, rt Type) (Type, error) {
	switch {
	case lt == TypeUnknown && rt == TypeUnknown:
		return TypeText, nil
	case lt == TypeUnknown:
		return rt, nil
	case rt == TypeUnknown, lt == rt:
		return lt, nil
	case lt.category() == catNumeric && rt.category() == catNumeric:
		return arithType(lt, rt), nil
	case lt.category() == catDatetime && rt.category() == catDatetime:
		if lt.rank() > rt.rank() {
			return lt, nil
		}
		return rt, nil
	case lt == TypeMzTimestamp && implicitCast(rt, lt):
		return lt, nil
	case rt == TypeMzTimestamp && implicitCast(lt, rt):
		return rt, nil
	}
	return TypeInvalid, errOperator(op, lt, rt)
}
