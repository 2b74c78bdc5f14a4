package pgrepr

import "github.com/shardtail/shardtail/row"

// Type OIDs from Postgres' pg_type catalog. The fourteen column types map
// one to one onto row.Type; the others are the ones the server needs to
// describe catalog results and parameters.
const (
	OIDBool        uint32 = 16
	OIDBytea       uint32 = 17
	OIDChar        uint32 = 18
	OIDName        uint32 = 19
	OIDInt8        uint32 = 20
	OIDInt2        uint32 = 21
	OIDInt4        uint32 = 23
	OIDText        uint32 = 25
	OIDOID         uint32 = 26
	OIDJSON        uint32 = 114
	OIDFloat4      uint32 = 700
	OIDFloat8      uint32 = 701
	OIDUnknown     uint32 = 705
	OIDTextArray   uint32 = 1009
	OIDBPChar      uint32 = 1042
	OIDVarchar     uint32 = 1043
	OIDDate        uint32 = 1082
	OIDTime        uint32 = 1083
	OIDTimestamp   uint32 = 1114
	OIDTimestampTZ uint32 = 1184
	OIDInterval    uint32 = 1186
	OIDNumeric     uint32 = 1700
	OIDRecord      uint32 = 2249
	OIDUUID        uint32 = 2950
	OIDJSONB       uint32 = 3802
)

// typeInfo is the wire metadata of one row.Type, indexed by the type.
var typeInfo = [...]struct {
	oid  uint32
	size int16
}{
	row.TypeInvalid:     {0, 0},
	row.TypeBool:        {OIDBool, 1},
	row.TypeInt2:        {OIDInt2, 2},
	row.TypeInt4:        {OIDInt4, 4},
	row.TypeInt8:        {OIDInt8, 8},
	row.TypeFloat4:      {OIDFloat4, 4},
	row.TypeFloat8:      {OIDFloat8, 8},
	row.TypeNumeric:     {OIDNumeric, -1},
	row.TypeText:        {OIDText, -1},
	row.TypeBytea:       {OIDBytea, -1},
	row.TypeTimestamp:   {OIDTimestamp, 8},
	row.TypeTimestampTZ: {OIDTimestampTZ, 8},
	row.TypeDate:        {OIDDate, 4},
	row.TypeJSONB:       {OIDJSONB, -1},
	row.TypeUUID:        {OIDUUID, 16},
}

// OID returns the pg_type OID of t, or 0 for an invalid type.
func OID(t row.Type) uint32 {
	if int(t) < len(typeInfo) {
		return typeInfo[t].oid
	}
	return 0
}

// TypeSize returns pg_type.typlen of t, the "data type size" field of
// RowDescription: the fixed width in bytes, or -1 for variable-length types
// (0 for an invalid type).
func TypeSize(t row.Type) int16 {
	if int(t) < len(typeInfo) {
		return typeInfo[t].size
	}
	return 0
}

// TypeFromOID returns the row.Type whose values a client sends with type
// OID oid. Besides the fourteen OIDs that OID returns, varchar maps to text,
// because its text and binary formats are text's. json does not map to
// jsonb: its binary format lacks jsonb's version byte.
func TypeFromOID(oid uint32) (row.Type, bool) {
	switch oid {
	case OIDBool:
		return row.TypeBool, true
	case OIDInt2:
		return row.TypeInt2, true
	case OIDInt4:
		return row.TypeInt4, true
	case OIDInt8:
		return row.TypeInt8, true
	case OIDFloat4:
		return row.TypeFloat4, true
	case OIDFloat8:
		return row.TypeFloat8, true
	case OIDNumeric:
		return row.TypeNumeric, true
	case OIDText, OIDVarchar:
		return row.TypeText, true
	case OIDBytea:
		return row.TypeBytea, true
	case OIDTimestamp:
		return row.TypeTimestamp, true
	case OIDTimestampTZ:
		return row.TypeTimestampTZ, true
	case OIDDate:
		return row.TypeDate, true
	case OIDJSONB:
		return row.TypeJSONB, true
	case OIDUUID:
		return row.TypeUUID, true
	}
	return row.TypeInvalid, false
}
