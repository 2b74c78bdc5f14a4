// Package row is shardtail's data model: column types, schemas, rows of
// datums, and updates (row, time, diff).
//
// A Datum is one of a small closed set of Go types, chosen so that every value
// is comparable with == where possible and cheap to copy:
//
//	SQL type     Go type       notes
//	NULL         nil
//	bool         bool
//	int2         int16
//	int4         int32
//	int8         int64
//	float4       float32
//	float8       float64
//	numeric      Numeric       canonical decimal text: no trailing zeros, no "+", "-0" is "0"
//	text         string
//	bytea        []byte        the only non-comparable datum
//	timestamp    Timestamp     microseconds since 1970-01-01 00:00:00
//	timestamptz  TimestampTZ   microseconds since the Unix epoch, UTC
//	date         Date          days since 1970-01-01
//	jsonb        JSON          canonical JSON text
//	uuid         UUID          16 bytes
//
// A Column may carry the type modifier it was declared with (TypeMod:
// varchar(n), numeric(p, s), timestamp(p)). Values keep the column's type
// (a varchar(3) holds text); the modifier bounds them, enforced by package
// expr on writes. Its zero value is none and is left out of a schema's JSON,
// so schemas stored before modifiers existed decode unchanged.
//
// Rows are totally ordered by Compare (column by column, NULL first). The
// order is deterministic but, for numeric and jsonb, not the SQL order: it is
// the order persist sorts parts in and consolidates by, where only equality
// and determinism matter.
//
// An Update is (Row, T, Diff): the row's multiplicity changes by Diff at
// time T (epoch milliseconds). Consolidate sorts updates by (row, time) and
// sums the diffs of equal pairs, dropping zeros.
package row
