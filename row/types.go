package row

import (
	"fmt"
	"strings"
)

// Type is the SQL type of a column.
type Type uint8

// The column types a shard can hold.
const (
	TypeInvalid Type = iota
	TypeBool
	TypeInt2
	TypeInt4
	TypeInt8
	TypeFloat4
	TypeFloat8
	TypeNumeric
	TypeText
	TypeBytea
	TypeTimestamp
	TypeTimestampTZ
	TypeDate
	TypeJSONB
	TypeUUID
)

var typeNames = [...]string{
	TypeInvalid:     "invalid",
	TypeBool:        "boolean",
	TypeInt2:        "smallint",
	TypeInt4:        "integer",
	TypeInt8:        "bigint",
	TypeFloat4:      "real",
	TypeFloat8:      "double precision",
	TypeNumeric:     "numeric",
	TypeText:        "text",
	TypeBytea:       "bytea",
	TypeTimestamp:   "timestamp without time zone",
	TypeTimestampTZ: "timestamp with time zone",
	TypeDate:        "date",
	TypeJSONB:       "jsonb",
	TypeUUID:        "uuid",
}

// String returns the type's canonical SQL name, as Postgres prints it.
func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Valid reports whether t is one of the defined column types.
func (t Type) Valid() bool { return t > TypeInvalid && t <= TypeUUID }

// typeAliases maps every spelling the SQL dialect accepts to its Type.
var typeAliases = map[string]Type{
	"bool": TypeBool, "boolean": TypeBool,
	"int2": TypeInt2, "smallint": TypeInt2,
	"int4": TypeInt4, "int": TypeInt4, "integer": TypeInt4,
	"int8": TypeInt8, "bigint": TypeInt8,
	"float4": TypeFloat4, "real": TypeFloat4,
	"float8": TypeFloat8, "float": TypeFloat8, "double precision": TypeFloat8, "double": TypeFloat8,
	"numeric": TypeNumeric, "decimal": TypeNumeric,
	"text": TypeText, "varchar": TypeText, "character varying": TypeText, "string": TypeText,
	"bytea":     TypeBytea,
	"timestamp": TypeTimestamp, "timestamp without time zone": TypeTimestamp,
	"timestamptz": TypeTimestampTZ, "timestamp with time zone": TypeTimestampTZ,
	"date":  TypeDate,
	"jsonb": TypeJSONB, "json": TypeJSONB,
	"uuid": TypeUUID,
}

// ParseType resolves a SQL type name (case-insensitive, any accepted alias).
func ParseType(name string) (Type, bool) {
	t, ok := typeAliases[strings.ToLower(strings.Join(strings.Fields(name), " "))]
	return t, ok
}

// Column is one column of a schema.
type Column struct {
	Name     string
	Type     Type
	Nullable bool
	// Mod is the type modifier the column was declared with (varchar(3),
	// numeric(5, 2)); the zero value is none. It is left out of the JSON
	// encoding when zero, so a schema without modifiers encodes as it did
	// before Mod existed, and a stored schema without the field decodes to
	// columns without modifiers.
	Mod TypeMod `json:",omitzero"`
}

// TypeMod is a type modifier: numeric(p, s), varchar(n), timestamp(p).
// The zero value is none. Values keep the type of the column; the modifier
// constrains them (package expr applies it, on casts and on writes).
type TypeMod struct {
	Set       bool `json:",omitempty"`
	Precision int  `json:",omitempty"` // numeric: total digits; timestamp: fractional digits
	Scale     int  `json:",omitempty"` // numeric: fractional digits
	Length    int  `json:",omitempty"` // varchar: characters
}

// Typmod returns the column's modifier as PostgreSQL encodes it in
// pg_attribute.atttypmod and RowDescription: -1 for none, n+4 for
// varchar(n), ((p<<16)|s)+4 for numeric(p, s) (s in 11 bits, as a
// negative scale is stored), p for timestamp(p).
func (c Column) Typmod() int32 {
	m := c.Mod
	if !m.Set {
		return -1
	}
	switch c.Type {
	case TypeText:
		return int32(m.Length) + 4
	case TypeNumeric:
		return int32(m.Precision<<16|m.Scale&0x7ff) + 4
	case TypeTimestamp, TypeTimestampTZ:
		return int32(m.Precision)
	}
	return -1
}

// TypeName returns the column's type as PostgreSQL's format_type prints
// it, with the modifier: "character varying(3)", "numeric(5,2)",
// "timestamp(3) without time zone"; without one, Type.String().
func (c Column) TypeName() string {
	m := c.Mod
	if !m.Set {
		return c.Type.String()
	}
	switch c.Type {
	case TypeText:
		return fmt.Sprintf("character varying(%d)", m.Length)
	case TypeNumeric:
		return fmt.Sprintf("numeric(%d,%d)", m.Precision, m.Scale)
	case TypeTimestamp:
		return fmt.Sprintf("timestamp(%d) without time zone", m.Precision)
	case TypeTimestampTZ:
		return fmt.Sprintf("timestamp(%d) with time zone", m.Precision)
	}
	return c.Type.String()
}

// Schema is the ordered list of a collection's columns.
type Schema struct {
	Columns []Column
}

// Index returns the position of the column named name, or -1.
func (s Schema) Index(name string) int {
	for i, c := range s.Columns {
		if c.Name == name {
			return i
		}
	}
	return -1
}

// Validate reports the first column that is malformed.
func (s Schema) Validate() error {
	seen := make(map[string]bool, len(s.Columns))
	for i, c := range s.Columns {
		if c.Name == "" {
			return fmt.Errorf("column %d: empty name", i)
		}
		if !c.Type.Valid() {
			return fmt.Errorf("column %q: invalid type %d", c.Name, c.Type)
		}
		if c.Mod.Set && c.Typmod() < 0 {
			return fmt.Errorf("column %q: type %s takes no modifier", c.Name, c.Type)
		}
		if seen[c.Name] {
			return fmt.Errorf("column %q: duplicate name", c.Name)
		}
		seen[c.Name] = true
	}
	return nil
}

// Equal reports whether two schemas have the same columns.
func (s Schema) Equal(o Schema) bool {
	if len(s.Columns) != len(o.Columns) {
		return false
	}
	for i := range s.Columns {
		if s.Columns[i] != o.Columns[i] {
			return false
		}
	}
	return true
}
