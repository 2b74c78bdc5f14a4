package expr

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/shardtail/shardtail/pgrepr"
	"github.com/shardtail/shardtail/row"
)

// jsonb values are canonical text (see pgrepr): operators decode them with
// encoding/json (numbers kept as text) and encode results back through
// pgrepr, which puts them in canonical form again.

func jsonDecode(j row.JSON) (any, error) {
	dec := json.NewDecoder(strings.NewReader(string(j)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, errf(CodeInternal, "malformed jsonb value: %v", err)
	}
	return v, nil
}

func jsonEncode(v any) (row.JSON, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", errf(CodeInternal, "encode jsonb: %v", err)
	}
	d, err := pgrepr.ParseText(row.TypeJSONB, strings.TrimSuffix(buf.String(), "\n"))
	if err != nil {
		return "", err
	}
	return d.(row.JSON), nil
}

// jsonResult returns v as jsonb (asText false) or, for ->>, as text: a
// string's contents, NULL for a JSON null, else the value's jsonb text.
func jsonResult(v any, asText bool) (row.Datum, error) {
	if !asText {
		return jsonEncode(v)
	}
	switch x := v.(type) {
	case nil:
		return nil, nil
	case string:
		return x, nil
	}
	j, err := jsonEncode(v)
	if err != nil {
		return nil, err
	}
	return string(j), nil
}

// jsonbGetKey is jsonb -> text (and ->> with asText): an object's field,
// NULL if absent or not an object.
func jsonbGetKey(asText bool) func(a, b row.Datum) (row.Datum, error) {
	return func(a, b row.Datum) (row.Datum, error) {
		v, err := jsonDecode(a.(row.JSON))
		if err != nil {
			return nil, err
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, nil
		}
		f, ok := obj[b.(string)]
		if !ok {
			return nil, nil
		}
		return jsonResult(f, asText)
	}
}

// jsonbGetIndex is jsonb -> int: an array's element, counting from the end
// when negative; NULL if out of range or not an array.
func jsonbGetIndex(asText bool) func(a, b row.Datum) (row.Datum, error) {
	return func(a, b row.Datum) (row.Datum, error) {
		v, err := jsonDecode(a.(row.JSON))
		if err != nil {
			return nil, err
		}
		i := int(b.(int32))
		arr, ok := v.([]any)
		if !ok {
			// Postgres stores a scalar as a one-element array, and
			// indexes it as one.
			if _, obj := v.(map[string]any); obj || (i != 0 && i != -1) {
				return nil, nil
			}
			return jsonResult(v, asText)
		}
		if i < 0 {
			i += len(arr)
		}
		if i < 0 || i >= len(arr) {
			return nil, nil
		}
		return jsonResult(arr[i], asText)
	}
}

// jsonTypeName is jsonb_typeof.
func jsonTypeName(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "boolean"
	}
	return "null"
}

// jsonbConcat is jsonb || jsonb: objects merge (the right side wins),
// arrays concatenate, and a scalar is treated as a one-element array.
func jsonbConcat(a, b row.Datum) (row.Datum, error) {
	x, y, err := jsonDecodePair(a, b)
	if err != nil {
		return nil, err
	}
	xo, xIsObj := x.(map[string]any)
	yo, yIsObj := y.(map[string]any)
	if xIsObj && yIsObj {
		m := make(map[string]any, len(xo)+len(yo))
		for k, v := range xo {
			m[k] = v
		}
		for k, v := range yo {
			m[k] = v
		}
		return jsonEncode(m)
	}
	asArray := func(v any) []any {
		if arr, ok := v.([]any); ok {
			return arr
		}
		return []any{v}
	}
	return jsonEncode(append(slices.Clone(asArray(x)), asArray(y)...))
}

// jsonbDeleteKey is jsonb - text: an object without the key, or an array
// without the string elements equal to it.
func jsonbDeleteKey(a, b row.Datum) (row.Datum, error) {
	v, err := jsonDecode(a.(row.JSON))
	if err != nil {
		return nil, err
	}
	key := b.(string)
	switch x := v.(type) {
	case map[string]any:
		delete(x, key)
		return jsonEncode(x)
	case []any:
		out := make([]any, 0, len(x))
		for _, e := range x {
			if s, ok := e.(string); !ok || s != key {
				out = append(out, e)
			}
		}
		return jsonEncode(out)
	}
	return nil, errf(CodeInvalidParameterValue, "cannot delete from scalar")
}

// jsonbDeleteIndex is jsonb - int: an array without one element (counting
// from the end when negative).
func jsonbDeleteIndex(a, b row.Datum) (row.Datum, error) {
	v, err := jsonDecode(a.(row.JSON))
	if err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case map[string]any:
		return nil, errf(CodeInvalidParameterValue, "cannot delete from object using integer index")
	case []any:
		i := int(b.(int32))
		if i < 0 {
			i += len(x)
		}
		if i < 0 || i >= len(x) {
			return a, nil
		}
		return jsonEncode(append(x[:i:i], x[i+1:]...))
	}
	return nil, errf(CodeInvalidParameterValue, "cannot delete from scalar")
}

// jsonbContains is @>: every field of an object on the right is in the
// left with a containing value; every element of an array on the right is
// contained by some element of the left; scalars are equal.
func jsonbContains(a, b row.Datum) (row.Datum, error) {
	x, y, err := jsonDecodePair(a, b)
	if err != nil {
		return nil, err
	}
	return jsonContains(x, y, true), nil
}

func jsonContains(x, y any, top bool) bool {
	switch yv := y.(type) {
	case map[string]any:
		xv, ok := x.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range yv {
			xe, ok := xv[k]
			if !ok || !jsonContains(xe, v, false) {
				return false
			}
		}
		return true
	case []any:
		xv, ok := x.([]any)
		if !ok {
			return false
		}
		for _, e := range yv {
			found := false
			for _, xe := range xv {
				// Inside arrays, scalars match scalars and containers
				// match containers of the same kind.
				if jsonContains(xe, e, false) {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
		return true
	}
	// A top-level array contains a scalar that is one of its elements.
	if xv, ok := x.([]any); ok && top {
		for _, xe := range xv {
			if jsonCompareValues(xe, y) == 0 {
				return true
			}
		}
		return false
	}
	return jsonCompareValues(x, y) == 0
}

// jsonbCompare orders jsonb values as Postgres' btree opclass does:
// object > array > boolean > number > string > null; objects and arrays
// by size first, then by content (object keys in jsonb's storage order,
// shorter keys first).
func jsonbCompare(a, b row.Datum) int {
	if a.(row.JSON) == b.(row.JSON) {
		return 0
	}
	x, err1 := jsonDecode(a.(row.JSON))
	y, err2 := jsonDecode(b.(row.JSON))
	if err1 != nil || err2 != nil {
		return strings.Compare(string(a.(row.JSON)), string(b.(row.JSON)))
	}
	return jsonCompareValues(x, y)
}

func jsonRank(v any) int {
	switch v.(type) {
	case nil:
		return 0
	case string:
		return 1
	case json.Number:
		return 2
	case bool:
		return 3
	case []any:
		return 4
	}
	return 5
}

func jsonKeyLess(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

func jsonCompareValues(x, y any) int {
	rx, ry := jsonRank(x), jsonRank(y)
	if rx != ry {
		return rx - ry
	}
	switch xv := x.(type) {
	case string:
		return strings.Compare(xv, y.(string))
	case json.Number:
		return row.CompareSQL(mustNumeric(string(xv)), mustNumeric(string(y.(json.Number))))
	case bool:
		yv := y.(bool)
		switch {
		case xv == yv:
			return 0
		case !xv:
			return -1
		}
		return 1
	case []any:
		yv := y.([]any)
		if len(xv) != len(yv) {
			return len(xv) - len(yv)
		}
		for i := range xv {
			if c := jsonCompareValues(xv[i], yv[i]); c != 0 {
				return c
			}
		}
		return 0
	case map[string]any:
		yv := y.(map[string]any)
		if len(xv) != len(yv) {
			return len(xv) - len(yv)
		}
		xk, yk := sortedKeys(xv), sortedKeys(yv)
		for i := range xk {
			if c := jsonKeyLess(xk[i], yk[i]); c != 0 {
				return c
			}
			if c := jsonCompareValues(xv[xk[i]], yv[yk[i]]); c != 0 {
				return c
			}
		}
	}
	return 0
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, jsonKeyLess)
	return keys
}

func mustNumeric(s string) row.Numeric {
	n, err := row.NormalizeNumeric(s)
	if err != nil {
		return "0"
	}
	return n
}

// toJSONValue converts a datum to the value to_jsonb gives it: numbers
// stay numbers (non-finite floats become strings), booleans booleans,
// jsonb itself, timestamps ISO 8601 strings with a "T", everything else
// its text.
func toJSONValue(t Type, d row.Datum) (any, error) {
	switch v := d.(type) {
	case nil:
		return nil, nil
	case bool:
		return v, nil
	case int16, int32, int64:
		i, _ := intValue(v)
		return json.Number(strconv.FormatInt(i, 10)), nil
	case float32, float64, row.Numeric:
		s := formatText(datumType(d), d)
		if s == "NaN" || strings.HasSuffix(s, "Infinity") {
			return s, nil
		}
		return json.Number(s), nil
	case row.JSON:
		return jsonDecode(v)
	case row.Timestamp, row.TimestampTZ:
		s := formatText(datumType(d), d)
		if len(s) > 10 && s[10] == ' ' {
			s = s[:10] + "T" + s[11:]
		}
		if _, ok := d.(row.TimestampTZ); ok && strings.HasSuffix(s, "+00") {
			s += ":00"
		}
		return s, nil
	}
	return formatText(t, d), nil
}

// jsonbToScalar is the cast from jsonb to bool or a number: the value
// must be a JSON boolean or number.
func jsonbToScalar(to Type) func(row.Datum) (row.Datum, error) {
	return func(d row.Datum) (row.Datum, error) {
		v, err := jsonDecode(d.(row.JSON))
		if err != nil {
			return nil, err
		}
		switch x := v.(type) {
		case bool:
			if to == TypeBool {
				return x, nil
			}
		case json.Number:
			if to != TypeBool {
				n, err := row.NormalizeNumeric(string(x))
				if err != nil {
					return nil, err
				}
				return numericCast(TypeNumeric, to)(n)
			}
		}
		kind := jsonTypeName(v)
		if kind == "number" {
			kind = "numeric"
		}
		return nil, errf(CodeInvalidParameterValue, "cannot cast jsonb %s to type %s", kind, to)
	}
}

// jsonDecodePair decodes the two jsonb operands of a binary operator.
func jsonDecodePair(a, b row.Datum) (x, y any, err error) {
	if x, err = jsonDecode(a.(row.JSON)); err != nil {
		return nil, nil, err
	}
	if y, err = jsonDecode(b.(row.JSON)); err != nil {
		return nil, nil, err
	}
	return x, y, nil
}
