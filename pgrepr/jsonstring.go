package pgrepr

// AppendJSONString appends s as a JSON string, escaped as AppendJSONValue
// escapes a text cell (Postgres' to_json escaping). It is
// AppendJSONValue(buf, row.TypeText, s) without boxing s in an interface,
// which allocates: for encoders that write many strings, such as the column
// names of every row of a sink's values.
func AppendJSONString(buf []byte, s string) []byte { return appendJSONString(buf, s) }
