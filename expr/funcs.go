package expr

import (
	"crypto/md5"
	"encoding/hex"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cockroachdb/apd/v3"
	"github.com/shardtail/shardtail/row"
)

// overload is one signature of a function and its implementation.
type overload struct {
	args     []Type
	variadic bool // the last of args repeats zero or more times
	ret      Type
	strict   bool // NULL argument: NULL result, fn not called
	nullable bool // may return NULL for non-NULL arguments
	usesNow  bool // reads EvalContext.Now: never folded
	// polymorphic: an "any" parameter takes the argument's type, which
	// must be known (Postgres' anyelement).
	polymorphic bool
	fn          func(ctx *EvalContext, args []row.Datum) (row.Datum, error)
}

// params returns the parameter types for n arguments, nil if the
// overload does not take n.
func (o *overload) params(n int) []Type {
	if !o.variadic {
		if n != len(o.args) {
			return nil
		}
		if n == 0 {
			return []Type{} // not nil: nil means "does not apply"
		}
		return o.args
	}
	fixed := len(o.args) - 1
	if n <= fixed {
		return nil // VARIADIC takes at least one argument
	}
	ps := make([]Type, n)
	copy(ps, o.args[:fixed])
	for i := fixed; i < n; i++ {
		ps[i] = o.args[fixed]
	}
	return ps
}

// functions is the function registry: name → overloads in order of
// preference (ties between equally good candidates go to the first, so
// float8 comes before numeric and text before bytea, as Postgres prefers).
//
// To add a function, append its overloads in init with def and one of the
// f0..f3 helpers (strict functions) or a literal *overload; the
// implementation gets non-NULL datums of the declared types (for a strict
// overload) and returns a datum of the result type. Functions must be
// deterministic: anything that reads the clock goes through EvalContext.
var functions = map[string][]*overload{}

func def(name string, ovs ...*overload) { functions[name] = append(functions[name], ovs...) }

func f0(ret Type, fn func(ctx *EvalContext) (row.Datum, error)) *overload {
	return &overload{ret: ret, strict: true, fn: func(ctx *EvalContext, _ []row.Datum) (row.Datum, error) { return fn(ctx) }}
}

func f1(a, ret Type, fn func(a row.Datum) (row.Datum, error)) *overload {
	return &overload{args: []Type{a}, ret: ret, strict: true,
		fn: func(_ *EvalContext, x []row.Datum) (row.Datum, error) { return fn(x[0]) }}
}

func f2(a, b, ret Type, fn func(a, b row.Datum) (row.Datum, error)) *overload {
	return &overload{args: []Type{a, b}, ret: ret, strict: true,
		fn: func(_ *EvalContext, x []row.Datum) (row.Datum, error) { return fn(x[0], x[1]) }}
}

func f3(a, b, c, ret Type, fn func(a, b, c row.Datum) (row.Datum, error)) *overload {
	return &overload{args: []Type{a, b, c}, ret: ret, strict: true,
		fn: func(_ *EvalContext, x []row.Datum) (row.Datum, error) { return fn(x[0], x[1], x[2]) }}
}

func fn(args []Type, ret Type, f func(ctx *EvalContext, args []row.Datum) (row.Datum, error)) *overload {
	return &overload{args: args, ret: ret, strict: true, fn: f}
}

// aggregates, windowFuncs and setFuncs are rejected with 0A000 rather than
// "does not exist", because they exist, just not here.
var (
	aggregates = setOf("count", "sum", "avg", "min", "max", "array_agg", "string_agg",
		"bool_and", "bool_or", "every", "stddev", "stddev_pop", "stddev_samp", "variance",
		"var_pop", "var_samp", "jsonb_agg", "jsonb_object_agg", "json_agg", "json_object_agg",
		"list_agg", "map_agg", "bit_and", "bit_or", "percentile_cont", "percentile_disc", "mode")
	windowFuncs = setOf("row_number", "rank", "dense_rank", "percent_rank", "cume_dist",
		"ntile", "lag", "lead", "first_value", "last_value", "nth_value")
	setFuncs = setOf("generate_series", "unnest", "jsonb_each", "jsonb_each_text",
		"jsonb_array_elements", "jsonb_array_elements_text", "jsonb_object_keys",
		"regexp_matches", "generate_subscripts", "regexp_split_to_table")
)

func setOf(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// maxStringBytes bounds the strings repeat and lpad build, as Postgres'
// 1 GB field limit does (lower, so that a query cannot exhaust memory).
const maxStringBytes = 64 << 20

func init() {
	T, I4, I8, F8, N, B, J := TypeText, TypeInt4, TypeInt8, TypeFloat8, TypeNumeric, TypeBool, TypeJSONB

	// Strings. Lengths and positions count characters, not bytes.
	def("lower", f1(T, T, func(a row.Datum) (row.Datum, error) { return strings.ToLower(a.(string)), nil }))
	def("upper", f1(T, T, func(a row.Datum) (row.Datum, error) { return strings.ToUpper(a.(string)), nil }))
	charLen := f1(T, I4, func(a row.Datum) (row.Datum, error) { return int32(utf8.RuneCountInString(a.(string))), nil })
	def("length", charLen, f1(TypeBytea, I4, func(a row.Datum) (row.Datum, error) { return int32(len(a.([]byte))), nil }))
	def("char_length", charLen)
	def("character_length", charLen)
	def("octet_length",
		f1(T, I4, func(a row.Datum) (row.Datum, error) { return int32(len(a.(string))), nil }),
		f1(TypeBytea, I4, func(a row.Datum) (row.Datum, error) { return int32(len(a.([]byte))), nil }))
	def("bit_length", f1(T, I4, func(a row.Datum) (row.Datum, error) { return int32(8 * len(a.(string))), nil }))
	substr2 := f2(T, I4, T, func(a, b row.Datum) (row.Datum, error) { return substring(a.(string), int64(b.(int32)), -1) })
	substr3 := f3(T, I4, I4, T, func(a, b, c row.Datum) (row.Datum, error) {
		if c.(int32) < 0 {
			return nil, errf("22011", "negative substring length not allowed")
		}
		return substring(a.(string), int64(b.(int32)), int64(c.(int32)))
	})
	def("substr", substr2, substr3)
	def("substring", substr2, substr3)
	trim := func(name string, left, right bool) {
		do := func(s, chars string) string {
			if left {
				s = strings.TrimLeft(s, chars)
			}
			if right {
				s = strings.TrimRight(s, chars)
			}
			return s
		}
		def(name,
			f1(T, T, func(a row.Datum) (row.Datum, error) { return do(a.(string), " "), nil }),
			f2(T, T, T, func(a, b row.Datum) (row.Datum, error) { return do(a.(string), b.(string)), nil }))
	}
	trim("btrim", true, true)
	trim("trim", true, true)
	trim("ltrim", true, false)
	trim("rtrim", false, true)
	def("replace", f3(T, T, T, T, func(a, b, c row.Datum) (row.Datum, error) {
		if b.(string) == "" {
			return a, nil
		}
		return strings.ReplaceAll(a.(string), b.(string), c.(string)), nil
	}))
	def("left", f2(T, I4, T, func(a, b row.Datum) (row.Datum, error) {
		r := []rune(a.(string))
		n := int(b.(int32))
		if n < 0 {
			n = max(len(r)+n, 0)
		}
		return string(r[:min(n, len(r))]), nil
	}))
	def("right", f2(T, I4, T, func(a, b row.Datum) (row.Datum, error) {
		r := []rune(a.(string))
		n := int(b.(int32))
		if n < 0 {
			n = max(len(r)+n, 0)
		}
		return string(r[len(r)-min(n, len(r)):]), nil
	}))
	strpos := f2(T, T, I4, func(a, b row.Datum) (row.Datum, error) {
		i := strings.Index(a.(string), b.(string))
		if i < 0 {
			return int32(0), nil
		}
		return int32(utf8.RuneCountInString(a.(string)[:i]) + 1), nil
	})
	def("strpos", strpos)
	def("position", strpos) // POSITION(sub IN s) is position(s, sub), as in Postgres
	def("starts_with", f2(T, T, B, func(a, b row.Datum) (row.Datum, error) {
		return strings.HasPrefix(a.(string), b.(string)), nil
	}))
	def("repeat", f2(T, I4, T, func(a, b row.Datum) (row.Datum, error) {
		n := int64(b.(int32))
		if n <= 0 {
			return "", nil
		}
		if int64(len(a.(string)))*n > maxStringBytes {
			return nil, errTooLarge
		}
		return strings.Repeat(a.(string), int(n)), nil
	}))
	def("reverse", f1(T, T, func(a row.Datum) (row.Datum, error) {
		r := []rune(a.(string))
		for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
			r[i], r[j] = r[j], r[i]
		}
		return string(r), nil
	}))
	for _, left := range []bool{true, false} {
		name := "rpad"
		if left {
			name = "lpad"
		}
		def(name,
			f2(T, I4, T, func(a, b row.Datum) (row.Datum, error) { return pad(a.(string), b.(int32), " ", left) }),
			f3(T, I4, T, T, func(a, b, c row.Datum) (row.Datum, error) { return pad(a.(string), b.(int32), c.(string), left) }))
	}
	def("split_part", f3(T, T, I4, T, splitPart))
	def("md5",
		f1(T, T, func(a row.Datum) (row.Datum, error) { return md5Hex([]byte(a.(string))), nil }),
		f1(TypeBytea, T, func(a row.Datum) (row.Datum, error) { return md5Hex(a.([]byte)), nil }))
	def("ascii", f1(T, I4, func(a row.Datum) (row.Datum, error) {
		r, _ := utf8.DecodeRuneInString(a.(string))
		if a.(string) == "" {
			r = 0
		}
		return int32(r), nil
	}))
	def("chr", f1(I4, T, func(a row.Datum) (row.Datum, error) {
		c := a.(int32)
		switch {
		case c == 0:
			return nil, errf("54000", "null character not permitted")
		case c < 0 || c > utf8.MaxRune:
			return nil, errf("54000", "requested character too large for encoding: %d", c)
		case !utf8.ValidRune(rune(c)):
			return nil, errf("54000", "requested character not valid for encoding: %d", c)
		}
		return string(rune(c)), nil
	}))
	def("to_hex",
		f1(I4, T, func(a row.Datum) (row.Datum, error) { return strconv.FormatUint(uint64(uint32(a.(int32))), 16), nil }),
		f1(I8, T, func(a row.Datum) (row.Datum, error) { return strconv.FormatUint(uint64(a.(int64)), 16), nil }))
	def("concat", &overload{args: []Type{typeAny}, variadic: true, ret: T, fn: concatFunc})
	def("concat_ws", &overload{args: []Type{T, typeAny}, variadic: true, ret: T, nullable: true, fn: func(_ *EvalContext, args []row.Datum) (row.Datum, error) {
		if args[0] == nil {
			return nil, nil
		}
		var parts []string
		for _, a := range args[1:] {
			if a != nil {
				parts = append(parts, formatText(datumType(a), a))
			}
		}
		return strings.Join(parts, args[0].(string)), nil
	}})

	// Numbers.
	def("abs",
		f1(TypeInt2, TypeInt2, intAbs[int16]), f1(I4, I4, intAbs[int32]), f1(I8, I8, intAbs[int64]),
		f1(TypeFloat4, TypeFloat4, func(a row.Datum) (row.Datum, error) { return float32(math.Abs(float64(a.(float32)))), nil }),
		f1(F8, F8, func(a row.Datum) (row.Datum, error) { return math.Abs(a.(float64)), nil }),
		f1(N, N, numericAbs))
	float1 := func(g func(float64) float64) func(a row.Datum) (row.Datum, error) {
		return func(a row.Datum) (row.Datum, error) { return g(a.(float64)), nil }
	}
	def("round", f1(F8, F8, float1(math.RoundToEven)), f1(N, N, numericIntegral(apd.RoundHalfUp)),
		f2(N, I4, N, numericScaled(apd.RoundHalfUp)))
	def("ceil", f1(F8, F8, float1(math.Ceil)), f1(N, N, numericIntegral(apd.RoundCeiling)))
	def("ceiling", f1(F8, F8, float1(math.Ceil)), f1(N, N, numericIntegral(apd.RoundCeiling)))
	def("floor", f1(F8, F8, float1(math.Floor)), f1(N, N, numericIntegral(apd.RoundFloor)))
	def("trunc", f1(F8, F8, float1(math.Trunc)), f1(N, N, numericIntegral(apd.RoundDown)),
		f2(N, I4, N, numericScaled(apd.RoundDown)))
	def("sign", f1(F8, F8, func(a row.Datum) (row.Datum, error) {
		x := a.(float64)
		switch {
		case x > 0:
			return 1.0, nil
		case x < 0:
			return -1.0, nil
		}
		return 0.0, nil // also for NaN, as Postgres' dsign
	}), f1(N, N, numericSign))
	def("sqrt", f1(F8, F8, func(a row.Datum) (row.Datum, error) {
		x := a.(float64)
		if x < 0 {
			return nil, errf(CodeInvalidArgumentForPowerFunction, "cannot take square root of a negative number")
		}
		return math.Sqrt(x), nil
	}), f1(N, N, numericSqrt))
	def("cbrt", f1(F8, F8, float1(math.Cbrt)))
	def("power", f2(F8, F8, F8, floatPow), f2(N, N, N, numericPow))
	def("pow", f2(F8, F8, F8, floatPow), f2(N, N, N, numericPow))
	def("exp", f1(F8, F8, func(a row.Datum) (row.Datum, error) {
		x := a.(float64)
		r := math.Exp(x)
		if math.IsInf(r, 0) && !math.IsInf(x, 0) {
			return nil, errFloatOverflow
		}
		if r == 0 && !math.IsInf(x, 0) {
			return nil, errFloatUnderflow
		}
		return r, nil
	}), f1(N, N, numericExp))
	logf := func(g func(float64) float64) func(a row.Datum) (row.Datum, error) {
		return func(a row.Datum) (row.Datum, error) {
			x := a.(float64)
			switch {
			case x == 0:
				return nil, errf("2201E", "cannot take logarithm of zero")
			case x < 0:
				return nil, errf("2201E", "cannot take logarithm of a negative number")
			}
			return g(x), nil
		}
	}
	log10 := func(a row.Datum) (row.Datum, error) { return numericLog(row.Numeric("10"), a) }
	def("ln", f1(F8, F8, logf(math.Log)), f1(N, N, numericLn))
	def("log", f1(F8, F8, logf(math.Log10)), f1(N, N, log10), f2(N, N, N, numericLog))
	def("log10", f1(F8, F8, logf(math.Log10)), f1(N, N, log10))
	def("pi", f0(F8, func(*EvalContext) (row.Datum, error) { return math.Pi, nil }))
	def("mod",
		f2(TypeInt2, TypeInt2, TypeInt2, intOp[int16]('%')), f2(I4, I4, I4, intOp[int32]('%')),
		f2(I8, I8, I8, intOp[int64]('%')), f2(N, N, N, numericOp('%')))

	// Date and time.
	nowTZ := &overload{ret: TypeTimestampTZ, strict: true, usesNow: true, fn: nowFunc(TypeTimestampTZ)}
	def("now", nowTZ)
	def("current_timestamp", nowTZ)
	def("transaction_timestamp", nowTZ)
	def("statement_timestamp", nowTZ)
	def("mz_now", &overload{ret: TypeMzTimestamp, strict: true, usesNow: true, fn: nowFunc(TypeMzTimestamp)})
	def("current_date", &overload{ret: TypeDate, strict: true, usesNow: true, fn: nowFunc(TypeDate)})
	def("localtimestamp", &overload{ret: TypeTimestamp, strict: true, usesNow: true, fn: nowFunc(TypeTimestamp)})
	def("date_trunc",
		fn([]Type{T, TypeTimestampTZ}, TypeTimestampTZ, dateTrunc(TypeTimestampTZ)),
		fn([]Type{T, TypeTimestamp}, TypeTimestamp, dateTrunc(TypeTimestamp)),
		fn([]Type{T, TypeInterval}, TypeInterval, intervalTrunc))
	for _, numeric := range []bool{false, true} {
		name, ret := "date_part", F8
		if numeric {
			name, ret = "extract", N
		}
		def(name,
			&overload{args: []Type{T, TypeTimestampTZ}, ret: ret, strict: true, nullable: true, fn: datePartFunc(TypeTimestampTZ, numeric)},
			&overload{args: []Type{T, TypeTimestamp}, ret: ret, strict: true, nullable: true, fn: datePartFunc(TypeTimestamp, numeric)},
			fn([]Type{T, TypeInterval}, ret, intervalPartFunc(numeric)))
	}
	def("to_timestamp", fn([]Type{F8}, TypeTimestampTZ, toTimestamp))

	// jsonb.
	def("jsonb_typeof", f1(J, T, func(a row.Datum) (row.Datum, error) {
		v, err := jsonDecode(a.(row.JSON))
		if err != nil {
			return nil, err
		}
		return jsonTypeName(v), nil
	}))
	def("jsonb_array_length", f1(J, I4, func(a row.Datum) (row.Datum, error) {
		v, err := jsonDecode(a.(row.JSON))
		if err != nil {
			return nil, err
		}
		arr, ok := v.([]any)
		if !ok {
			if _, obj := v.(map[string]any); obj {
				return nil, errf(CodeInvalidParameterValue, "cannot get array length of a non-array")
			}
			return nil, errf(CodeInvalidParameterValue, "cannot get array length of a scalar")
		}
		return int32(len(arr)), nil
	}))
	def("to_jsonb", &overload{args: []Type{typeAny}, ret: J, strict: true, polymorphic: true, fn: func(_ *EvalContext, args []row.Datum) (row.Datum, error) {
		v, err := toJSONValue(datumType(args[0]), args[0])
		if err != nil {
			return nil, err
		}
		return jsonEncode(v)
	}})
	def("jsonb_build_array", &overload{args: []Type{typeAny}, variadic: true, ret: J, fn: func(_ *EvalContext, args []row.Datum) (row.Datum, error) {
		arr := make([]any, len(args))
		for i, a := range args {
			v, err := toJSONValue(datumType(a), a)
			if err != nil {
				return nil, err
			}
			arr[i] = v
		}
		return jsonEncode(arr)
	}})
	def("jsonb_build_object", &overload{args: []Type{typeAny}, variadic: true, ret: J, fn: func(_ *EvalContext, args []row.Datum) (row.Datum, error) {
		if len(args)%2 != 0 {
			return nil, errf(CodeInvalidParameterValue, "argument list must have even number of elements")
		}
		obj := make(map[string]any, len(args)/2)
		for i := 0; i < len(args); i += 2 {
			if args[i] == nil {
				return nil, errf("22004", "argument %d cannot be null", i+1)
			}
			v, err := toJSONValue(datumType(args[i+1]), args[i+1])
			if err != nil {
				return nil, err
			}
			obj[formatText(datumType(args[i]), args[i])] = v
		}
		return jsonEncode(obj)
	}})
}

// substring is Postgres' text_substring: characters from start (1-based,
// possibly before the string) for count characters (-1: to the end).
func substring(s string, start, count int64) (row.Datum, error) {
	r := []rune(s)
	from := max(start, 1)
	end := int64(len(r)) + 1
	if count >= 0 {
		end = min(start+count, end)
	}
	if end <= from || from > int64(len(r)) {
		return "", nil
	}
	return string(r[from-1 : end-1]), nil
}

func pad(s string, n int32, fill string, left bool) (row.Datum, error) {
	if n <= 0 {
		return "", nil
	}
	if int64(n)*4 > maxStringBytes {
		return nil, errTooLarge
	}
	r := []rune(s)
	if len(r) >= int(n) {
		return string(r[:n]), nil
	}
	f := []rune(fill)
	if len(f) == 0 {
		return s, nil
	}
	padding := make([]rune, 0, int(n)-len(r))
	for i := 0; len(padding) < int(n)-len(r); i++ {
		padding = append(padding, f[i%len(f)])
	}
	if left {
		return string(padding) + s, nil
	}
	return s + string(padding), nil
}

func splitPart(a, b, c row.Datum) (row.Datum, error) {
	s, delim, n := a.(string), b.(string), int(c.(int32))
	if n == 0 {
		return nil, errf(CodeInvalidParameterValue, "field position must not be zero")
	}
	var parts []string
	if delim == "" {
		parts = []string{s}
	} else {
		parts = strings.Split(s, delim)
	}
	if s == "" {
		return "", nil
	}
	if n < 0 {
		n += len(parts) + 1
	}
	if n < 1 || n > len(parts) {
		return "", nil
	}
	return parts[n-1], nil
}

// cat is a type's category, with every uncategorized type its own.
func cat(t Type) int {
	if c := t.category(); c != catOther {
		return int(c)
	}
	return 100 + int(t)
}

func md5Hex(b []byte) string {
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

// concatFunc is concat(...): the text of every non-NULL argument, as its
// output function prints it.
func concatFunc(_ *EvalContext, args []row.Datum) (row.Datum, error) {
	var b strings.Builder
	for _, a := range args {
		if a != nil {
			b.WriteString(formatText(datumType(a), a))
		}
	}
	return b.String(), nil
}

// pickCandidate chooses among candidate parameter lists for arguments of
// types args, in outline as Postgres' func_select_candidate: only
// candidates every argument converts to implicitly; the most exact matches
// win; among ties, unknown arguments prefer text parameters, and then
// candidates whose inexact parameters are preferred types. It returns the
// index chosen, -1 for none, -2 for an ambiguous choice.
func pickCandidate(args []Type, cands [][]Type) int {
	var best []int
	bestScore := -1
	for i, ps := range cands {
		if ps == nil {
			continue
		}
		score, ok := 0, true
		for k, a := range args {
			if !implicitCast(a, ps[k]) {
				ok = false
				break
			}
			if a == ps[k] || (ps[k] == typeAny && a != TypeUnknown) {
				score++
			}
		}
		if !ok {
			continue
		}
		switch {
		case score > bestScore:
			best, bestScore = []int{i}, score
		case score == bestScore:
			best = append(best, i)
		}
	}
	if len(best) == 0 {
		return -1
	}
	if len(best) == 1 {
		return best[0]
	}
	hasUnknown := false
	for _, a := range args {
		hasUnknown = hasUnknown || a == TypeUnknown
	}
	if hasUnknown {
		var textual []int
		for _, i := range best {
			ok := true
			for k, a := range args {
				if a == TypeUnknown && cands[i][k] != TypeText && cands[i][k] != typeAny {
					ok = false
				}
			}
			if ok {
				textual = append(textual, i)
			}
		}
		switch len(textual) {
		case 0:
			// No candidate takes text for the unknown arguments: they
			// must at least agree on the category, else the choice is
			// ambiguous.
			for k, a := range args {
				if a != TypeUnknown {
					continue
				}
				for _, i := range best[1:] {
					if cat(cands[i][k]) != cat(cands[best[0]][k]) {
						return -2
					}
				}
			}
		case 1:
			return textual[0]
		default:
			best = textual
		}
	}
	var pref []int
	for _, i := range best {
		ok := true
		for k, a := range args {
			if a != cands[i][k] && !preferred(cands[i][k]) && cands[i][k] != typeAny {
				ok = false
			}
		}
		if ok {
			pref = append(pref, i)
		}
	}
	switch {
	case len(pref) >= 1:
		return pref[0]
	case hasUnknown:
		return -2
	}
	return best[0]
}
