package expr

import (
	"fmt"
	"strings"

	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/sql"
)

// Type is the type of an expression: one of the fourteen column types of
// row.Type (with the same numeric values, so Type(row.TypeInt4) is
// TypeInt4), or one of the pseudo-types that only exist while planning and
// evaluating: TypeUnknown, TypeMzTimestamp and TypeInterval. Rep gives the
// column type a value of each type is stored and sent as.
type Type uint8

// The expression types. The first fifteen mirror row.Type.
const (
	TypeInvalid     = Type(row.TypeInvalid)
	TypeBool        = Type(row.TypeBool)
	TypeInt2        = Type(row.TypeInt2)
	TypeInt4        = Type(row.TypeInt4)
	TypeInt8        = Type(row.TypeInt8)
	TypeFloat4      = Type(row.TypeFloat4)
	TypeFloat8      = Type(row.TypeFloat8)
	TypeNumeric     = Type(row.TypeNumeric)
	TypeText        = Type(row.TypeText)
	TypeBytea       = Type(row.TypeBytea)
	TypeTimestamp   = Type(row.TypeTimestamp)
	TypeTimestampTZ = Type(row.TypeTimestampTZ)
	TypeDate        = Type(row.TypeDate)
	TypeJSONB       = Type(row.TypeJSONB)
	TypeUUID        = Type(row.TypeUUID)

	// TypeUnknown is the type of a string literal or NULL before context
	// resolves it, as in Postgres: in `a = '5'` the literal becomes a's type.
	// Its values are Go strings. A value still unknown at the end of
	// planning is text.
	TypeUnknown Type = 64 + iota
	// TypeMzTimestamp is Materialize's mz_timestamp: an unsigned count of
	// milliseconds since the Unix epoch, the type of AS OF, UP TO and
	// mz_now(). Its values are uint64; it is stored and sent as numeric.
	TypeMzTimestamp
	// TypeInterval is a time span. Its values are Interval; it is sent as
	// text (shards hold no interval columns).
	TypeInterval
	// typeAny is the parameter type of functions such as concat that
	// accept every argument type. No expression has it.
	typeAny
)

// String returns the type's name as Postgres prints it in messages
// ("integer", "timestamp with time zone", "unknown").
func (t Type) String() string {
	switch t {
	case TypeUnknown:
		return "unknown"
	case TypeMzTimestamp:
		return "mz_timestamp"
	case TypeInterval:
		return "interval"
	case typeAny:
		return "any"
	}
	if t <= TypeUUID {
		return row.Type(t).String()
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// FromRow returns the expression type of a column type.
func FromRow(t row.Type) Type { return Type(t) }

// Rep returns the column type that values of t are stored and sent as:
// t itself for column types, text for unknown and interval, numeric for
// mz_timestamp. Values convert with ToRep.
func (t Type) Rep() row.Type {
	switch t {
	case TypeUnknown, TypeInterval:
		return row.TypeText
	case TypeMzTimestamp:
		return row.TypeNumeric
	}
	return row.Type(t)
}

// IsRow reports whether t is a column type.
func (t Type) IsRow() bool { return t > TypeInvalid && t <= TypeUUID }

// ToRep converts d, a value of type t, to a value of t.Rep(): an
// mz_timestamp to its decimal numeric, an interval to its text.
func ToRep(t Type, d row.Datum) row.Datum {
	switch v := d.(type) {
	case uint64:
		return row.Numeric(fmt.Sprint(v))
	case Interval:
		return v.String()
	}
	return d
}

// ParseText parses the text form of a value of type t, as a bound
// parameter in text format: row types through pgrepr, intervals and
// mz_timestamps by their own input functions.
func ParseText(t Type, s string) (row.Datum, error) {
	switch t {
	case TypeUnknown:
		return s, nil
	case TypeInterval:
		return ParseInterval(s)
	case TypeMzTimestamp:
		return parseMzTimestamp(s)
	}
	if !t.IsRow() {
		return nil, errf(CodeInternal, "cannot parse a value of type %s", t)
	}
	return parseRowText(row.Type(t), s)
}

// category groups types as Postgres' typcategory does, for resolving the
// common type of CASE, COALESCE, IN and operators.
type category uint8

const (
	catOther category = iota
	catNumeric
	catDatetime
	catString
)

func (t Type) category() category {
	switch t {
	case TypeInt2, TypeInt4, TypeInt8, TypeNumeric, TypeFloat4, TypeFloat8:
		return catNumeric
	case TypeDate, TypeTimestamp, TypeTimestampTZ:
		return catDatetime
	case TypeText:
		return catString
	}
	return catOther
}

// rank orders the types of one category by implicit widening: a type
// converts implicitly to any type of its category with a higher rank
// (int2 < int4 < int8 < numeric < real < double precision; date <
// timestamp < timestamptz).
func (t Type) rank() int {
	switch t {
	case TypeInt2, TypeDate:
		return 1
	case TypeInt4, TypeTimestamp:
		return 2
	case TypeInt8, TypeTimestampTZ:
		return 3
	case TypeNumeric:
		return 4
	case TypeFloat4:
		return 5
	case TypeFloat8:
		return 6
	}
	return 0
}

func (t Type) isInteger() bool { return t == TypeInt2 || t == TypeInt4 || t == TypeInt8 }
func (t Type) isFloat() bool   { return t == TypeFloat4 || t == TypeFloat8 }

// typeRef is a resolved sql.TypeName: the type, its modifier, and the name
// Postgres gives an output column that is a cast to it (int4 for integer).
type typeRef struct {
	typ     Type
	mod     row.TypeMod
	colName string
}

// unsupportedTypes are Postgres types shardtail knows of but does not
// implement; casting to one is feature_not_supported rather than "does not
// exist".
var unsupportedTypes = map[string]bool{
	"time": true, "time without time zone": true, "time with time zone": true, "timetz": true,
	"char": true, "character": true, "bpchar": true, "name": true, "money": true,
	"bit": true, "varbit": true, "bit varying": true, "inet": true, "cidr": true,
	"macaddr": true, "xml": true, "oid": true, "regclass": true, "regproc": true,
	"regtype": true, "tsvector": true, "tsquery": true, "point": true,
	"uint2": true, "uint4": true, "uint8": true, "int2vector": true, "record": true,
	"list": true, "map": true,
}

// internalNames maps the spellings of a type to the name Postgres uses for
// an output column named after a cast (SELECT 1::integer is column "int4").
var internalNames = map[string]string{
	"integer": "int4", "int": "int4", "smallint": "int2", "bigint": "int8",
	"real": "float4", "float": "float8", "double precision": "float8", "double": "float8",
	"boolean": "bool", "decimal": "numeric", "character varying": "varchar",
	"timestamp with time zone": "timestamptz", "timestamp without time zone": "timestamp",
	"json": "jsonb", "string": "text",
}

// resolveType resolves a written type name.
func resolveType(tn sql.TypeName) (typeRef, error) {
	name := tn.Name
	if tn.Array {
		return typeRef{}, errf(CodeFeatureNotSupported, "array types are not supported yet")
	}
	switch tn.Schema {
	case "", "pg_catalog", "mz_catalog":
	default:
		return typeRef{}, errf(CodeUndefinedObject, "type %q does not exist", tn.Schema+"."+name)
	}
	ref := typeRef{colName: name}
	if n, ok := internalNames[name]; ok {
		ref.colName = n
	}
	switch name {
	case "interval":
		ref.typ = TypeInterval
	case "mz_timestamp":
		ref.typ = TypeMzTimestamp
	case "float":
		// float(p) is real for p <= 24 and double precision above, as in
		// Postgres.
		ref.typ = TypeFloat8
		if len(tn.Modifiers) == 1 {
			p := tn.Modifiers[0]
			switch {
			case p < 1:
				return typeRef{}, errf(CodeInvalidParameterValue, "precision for type float must be at least 1 bit")
			case p <= 24:
				ref.typ, ref.colName = TypeFloat4, "float4"
			case p <= 53:
			default:
				return typeRef{}, errf(CodeInvalidParameterValue, "precision for type float must be less than 54 bits")
			}
			return ref, nil
		}
	default:
		rt, ok := row.ParseType(name)
		if !ok {
			if unsupportedTypes[name] {
				return typeRef{}, errf(CodeFeatureNotSupported, "type %s is not supported yet", name)
			}
			return typeRef{}, errf(CodeUndefinedObject, "type %q does not exist", name)
		}
		ref.typ = Type(rt)
	}
	if tn.Modifiers == nil {
		return ref, nil
	}
	mods := tn.Modifiers
	switch {
	case ref.typ == TypeNumeric && len(mods) <= 2:
		p, s := mods[0], 0
		if len(mods) == 2 {
			s = mods[1]
		}
		if p < 1 || p > 1000 {
			return typeRef{}, errf(CodeInvalidParameterValue, "NUMERIC precision %d must be between 1 and 1000", p)
		}
		if s < -1000 || s > 1000 {
			return typeRef{}, errf(CodeInvalidParameterValue, "NUMERIC scale %d must be between -1000 and 1000", s)
		}
		ref.mod = row.TypeMod{Set: true, Precision: p, Scale: s}
	case ref.typ == TypeText && len(mods) == 1 && (name == "varchar" || name == "character varying"):
		if mods[0] < 1 {
			return typeRef{}, errf(CodeInvalidParameterValue, "length for type varchar must be at least 1")
		}
		ref.mod = row.TypeMod{Set: true, Length: mods[0]}
	case (ref.typ == TypeTimestamp || ref.typ == TypeTimestampTZ) && len(mods) == 1:
		p := mods[0]
		if p < 0 {
			return typeRef{}, errf(CodeInvalidParameterValue, "TIMESTAMP(%d) precision must not be negative", p)
		}
		ref.mod = row.TypeMod{Set: true, Precision: min(p, 6)}
	default:
		return typeRef{}, errf(CodeSyntaxError, "type modifier is not allowed for type %q", strings.ToLower(name))
	}
	return ref, nil
}
