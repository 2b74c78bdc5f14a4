package expr

import (
	"math"
	"math/big"
	"math/bits"
	"strconv"
	"strings"

	"github.com/cockroachdb/apd/v3"
	"github.com/shardtail/shardtail/row"
)

// Integer arithmetic checks overflow as Postgres does: int2 and int4 are
// computed in int64 and range-checked; int8 uses overflow tests. Division
// truncates toward zero, and INT_MIN / -1 overflows.

type intKind interface{ ~int16 | ~int32 | ~int64 }

// intBounds returns the range and overflow error of an integer type.
func intBounds[T intKind]() (lo, hi int64, err *Error) {
	var z T
	switch any(z).(type) {
	case int16:
		return math.MinInt16, math.MaxInt16, errInt2Range
	case int32:
		return math.MinInt32, math.MaxInt32, errInt4Range
	}
	return math.MinInt64, math.MaxInt64, errInt8Range
}

// intOp returns the integer operator op ('+', '-', '*', '/', '%') on T.
func intOp[T intKind](op byte) func(a, b row.Datum) (row.Datum, error) {
	lo, hi, rangeErr := intBounds[T]()
	wide := hi < math.MaxInt64
	return func(a, b row.Datum) (row.Datum, error) {
		x, y := int64(a.(T)), int64(b.(T))
		var r int64
		switch op {
		case '+':
			var ok bool
			if r, ok = addInt64(x, y); !ok {
				return nil, rangeErr
			}
		case '-':
			var ok bool
			if r, ok = subInt64(x, y); !ok {
				return nil, rangeErr
			}
		case '*':
			if wide {
				r = x * y // |x|,|y| < 2^31: cannot overflow int64
			} else {
				var ok bool
				if r, ok = mulInt64(x, y); !ok {
					return nil, rangeErr
				}
			}
		case '/':
			if y == 0 {
				return nil, errDivisionByZero
			}
			if y == -1 {
				if x == lo {
					return nil, rangeErr
				}
				return T(-x), nil
			}
			r = x / y
		case '%':
			if y == 0 {
				return nil, errDivisionByZero
			}
			if y == -1 {
				return T(0), nil
			}
			r = x % y
		}
		if r < lo || r > hi {
			return nil, rangeErr
		}
		return T(r), nil
	}
}

// intBitOp returns a bitwise operator ('&', '|', '#', '<', '>' for << and
// >>; shifts take an int4 count, as in Postgres).
func intBitOp[T intKind](op byte) func(a, b row.Datum) (row.Datum, error) {
	return func(a, b row.Datum) (row.Datum, error) {
		x := a.(T)
		switch op {
		case '&':
			return x & b.(T), nil
		case '|':
			return x | b.(T), nil
		case '#':
			return x ^ b.(T), nil
		}
		// Postgres shifts as C does on x86-64: smallints are promoted
		// to 32 bits, and the count is taken modulo the width.
		if w := bitsOf[T](); w < 32 {
			n := uint32(b.(int32)) % 32
			if op == '<' {
				return T(int32(x) << n), nil
			}
			return T(int32(x) >> n), nil
		}
		n := uint(b.(int32)) % uint(bitsOf[T]())
		if op == '<' {
			return x << n, nil
		}
		return x >> n, nil
	}
}

func bitsOf[T intKind]() int {
	var z T
	switch any(z).(type) {
	case int16:
		return 16
	case int32:
		return 32
	}
	return 64
}

func intNeg[T intKind](a row.Datum) (row.Datum, error) {
	lo, _, rangeErr := intBounds[T]()
	x := a.(T)
	if int64(x) == lo {
		return nil, rangeErr
	}
	return -x, nil
}

func intAbs[T intKind](a row.Datum) (row.Datum, error) {
	x := a.(T)
	if x >= 0 {
		return x, nil
	}
	return intNeg[T](x)
}

func subInt64(a, b int64) (int64, bool) {
	c := a - b
	if (c < a) != (b > 0) {
		return 0, false
	}
	return c, true
}

func mulInt64(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	hi, lo := bits.Mul64(uint64(abs64(a)), uint64(abs64(b)))
	neg := (a < 0) != (b < 0)
	if hi != 0 || (!neg && lo > math.MaxInt64) || (neg && lo > 1<<63) {
		return 0, false
	}
	if neg {
		return int64(-lo), true
	}
	return int64(lo), true
}

// abs64 returns |a| as a uint64-safe value (MinInt64 maps to itself, whose
// uint64 is 2^63).
func abs64(a int64) int64 {
	if a < 0 {
		return -a
	}
	return a
}

// Floats follow IEEE arithmetic with Postgres' checks: a finite result of
// finite operands that overflows to infinity is an error, as is an exact
// zero from non-zero factors (underflow), and division by zero.

type floatKind interface{ ~float32 | ~float64 }

func floatOp[T floatKind](op byte) func(a, b row.Datum) (row.Datum, error) {
	return func(a, b row.Datum) (row.Datum, error) {
		x, y := a.(T), b.(T)
		var r T
		switch op {
		case '+':
			r = x + y
		case '-':
			r = x - y
		case '*':
			r = x * y
			if r == 0 && x != 0 && y != 0 {
				return nil, errFloatUnderflow
			}
		case '/':
			if y == 0 && !isNaN(x) {
				return nil, errDivisionByZero
			}
			r = x / y
			if r == 0 && x != 0 && !isInf(y) {
				return nil, errFloatUnderflow
			}
		}
		if isInf(r) && !isInf(x) && !isInf(y) {
			return nil, errFloatOverflow
		}
		return r, nil
	}
}

func isNaN[T floatKind](x T) bool { return x != x }
func isInf[T floatKind](x T) bool { return math.IsInf(float64(x), 0) }

// checkFloat applies Postgres' overflow and underflow checks to the result
// of a float8 function of one argument.
func checkFloat(r, x float64) (row.Datum, error) {
	if math.IsInf(r, 0) && !math.IsInf(x, 0) {
		return nil, errFloatOverflow
	}
	if r == 0 && x != 0 {
		return nil, errFloatUnderflow
	}
	return r, nil
}

// floatPow is Postgres' dpow: POSIX's NaN and infinity rules made
// explicit, the SQL standard's errors, then overflow and underflow checks.
func floatPow(a, b row.Datum) (row.Datum, error) {
	x, y := a.(float64), b.(float64)
	switch {
	case math.IsNaN(x):
		if math.IsNaN(y) || y != 0 {
			return math.NaN(), nil
		}
		return 1.0, nil
	case math.IsNaN(y):
		if x != 1 {
			return math.NaN(), nil
		}
		return 1.0, nil
	case x == 0 && y < 0:
		return nil, errf(CodeInvalidArgumentForPowerFunction, "zero raised to a negative power is undefined")
	case x < 0 && math.Floor(y) != y:
		return nil, errf(CodeInvalidArgumentForPowerFunction, "a negative number raised to a non-integer power yields a complex result")
	case math.IsInf(y, 0):
		ax := math.Abs(x)
		switch {
		case ax == 1:
			return 1.0, nil
		case (y > 0) == (ax > 1):
			return math.Inf(1), nil
		}
		return 0.0, nil
	case math.IsInf(x, 0):
		return math.Pow(x, y), nil
	}
	r := math.Pow(x, y)
	if math.IsInf(r, 0) {
		return nil, errFloatOverflow
	}
	if r == 0 && x != 0 {
		return nil, errFloatUnderflow
	}
	return r, nil
}

// Numeric arithmetic runs on apd decimals. Addition, subtraction and
// multiplication are exact; division and square root choose their result
// scale as Postgres' select_div_scale does (at least 16 significant
// digits, and no fewer fractional digits than either input), and round
// half away from zero. Results are canonical row.Numeric text, and bounded
// by Postgres' limits: 131072 digits before the point, 16383 after.

const (
	numericMaxWeight = 131072 // digits before the decimal point
	numericMaxScale  = 16383  // digits after it
	numericMinSig    = 16     // NUMERIC_MIN_SIG_DIGITS
	numericMaxDisp   = 1000   // NUMERIC_MAX_DISPLAY_SCALE
)

func numNaN(a, b row.Numeric) bool { return a == "NaN" || b == "NaN" }

// numDec parses a canonical numeric. An integer's trailing zeros go into
// the exponent: 1e100000 is then a one-digit coefficient, and arithmetic
// on it (and apd's Reduce, which strips zeros one division at a time)
// stays cheap.
func numDec(n row.Numeric) *apd.Decimal {
	s := string(n)
	if strings.IndexByte(s, '.') < 0 && len(s) > 1 && s[len(s)-1] == '0' {
		k := len(s) - len(strings.TrimRight(s, "0"))
		if k == len(s) || (s[0] == '-' && k == len(s)-1) {
			k--
		}
		if d, _, err := apd.NewFromString(s[:len(s)-k]); err == nil {
			d.Exponent += int32(k)
			return d
		}
	}
	return n.Decimal()
}

// exactCtx returns a context precise enough for an exact result of up to
// digits digits.
func exactCtx(digits int64) *apd.Context {
	if digits < 16 {
		digits = 16
	}
	c := apd.BaseContext.WithPrecision(uint32(min(digits, numericMaxWeight+numericMaxScale+16)))
	c.Rounding = apd.RoundHalfUp
	return c
}

// numDigits returns the number of digits of d's coefficient.
func numDigits(d *apd.Decimal) int64 { return d.NumDigits() }

// numResult checks a result against numeric's range and returns it in
// canonical form, rounding away fractional digits beyond the maximum scale.
func numResult(d *apd.Decimal) (row.Datum, error) {
	if d.Form != apd.Finite {
		if d.Form == apd.Infinite {
			return nil, errNumericRange
		}
		return row.Numeric("NaN"), nil
	}
	if !d.IsZero() && d.NumDigits()+int64(d.Exponent) > numericMaxWeight {
		return nil, errNumericRange
	}
	if d.Exponent < -numericMaxScale {
		d = quantize(d, -numericMaxScale, apd.RoundHalfUp)
	}
	return row.NumericFromDecimal(d), nil
}

// quantize rounds d to a multiple of 10^exp with mode (RoundHalfUp: half
// away from zero; RoundDown: toward zero; RoundCeiling; RoundFloor). It
// is exact big-integer arithmetic: apd's Quantize rounds to zero whenever
// every digit is shifted out, whatever the mode (0.001 to 0 digits).
func quantize(d *apd.Decimal, exp int32, mode apd.Rounder) *apd.Decimal {
	if d.Form != apd.Finite || d.Exponent >= exp {
		return d
	}
	shift := int64(exp) - int64(d.Exponent)
	coeff := d.Coeff.MathBigInt()
	pow := new(big.Int).Exp(big.NewInt(10), big.NewInt(shift), nil)
	q, r := new(big.Int).QuoRem(coeff, pow, new(big.Int))
	up := false
	if r.Sign() != 0 {
		switch mode {
		case apd.RoundHalfUp:
			up = new(big.Int).Lsh(r, 1).Cmp(pow) >= 0
		case apd.RoundCeiling:
			up = !d.Negative
		case apd.RoundFloor:
			up = d.Negative
		case apd.RoundUp:
			up = true
		}
	}
	if up {
		q.Add(q, big.NewInt(1))
	}
	var out apd.Decimal
	out.Coeff.SetMathBigInt(q)
	out.Exponent = exp
	out.Negative = d.Negative && q.Sign() != 0
	return &out
}

func numericOp(op byte) func(a, b row.Datum) (row.Datum, error) {
	return func(a, b row.Datum) (row.Datum, error) {
		an, bn := a.(row.Numeric), b.(row.Numeric)
		if numNaN(an, bn) {
			return row.Numeric("NaN"), nil
		}
		x, y := numDec(an), numDec(bn)
		if (op == '/' || op == '%') && y.IsZero() {
			return nil, errDivisionByZero
		}
		var r apd.Decimal
		var err error
		switch op {
		case '+', '-':
			// Exact: the digits span from the higher leading digit to the
			// lower trailing one, plus a carry.
			hiExp := max(numDigits(x)+int64(x.Exponent), numDigits(y)+int64(y.Exponent))
			loExp := min(int64(x.Exponent), int64(y.Exponent))
			ctx := exactCtx(hiExp - loExp + 2)
			if op == '+' {
				_, err = ctx.Add(&r, x, y)
			} else {
				_, err = ctx.Sub(&r, x, y)
			}
		case '*':
			_, err = exactCtx(numDigits(x)+numDigits(y)+1).Mul(&r, x, y)
		case '%':
			// Postgres' mod truncates the quotient: the result has the
			// dividend's sign.
			// The context must hold the integer quotient's digits.
			_, err = exactCtx(numDigits(x)+numDigits(y)+int64(abs32(x.Exponent-y.Exponent))+2).Rem(&r, x, y)
		case '/':
			return numericDiv(x, y, divScale(x, y))
		}
		if err != nil {
			return nil, errNumericRange
		}
		return numResult(&r)
	}
}

func abs32(x int32) int32 {
	if x < 0 {
		return -x
	}
	return x
}

// nbaseWeight returns Postgres' weight of d in base-10000 digits (the
// position of its leading base-10000 digit) and the value of that digit.
func nbaseWeight(d *apd.Decimal) (weight int64, first int64) {
	// d = coeff * 10^exp; the leading decimal digit is at position
	// lead = digits + exp - 1 (10^lead).
	lead := numDigits(d) + int64(d.Exponent) - 1
	weight = floorDiv(lead, 4)
	// The leading base-10000 digit holds the decimal digits from
	// 10^(4*weight) up to 10^lead.
	s := d.Coeff.String()
	n := lead - 4*weight + 1 // how many decimal digits it holds
	if int64(len(s)) < n {
		s += "0000"[:n-int64(len(s))]
	}
	first, _ = strconv.ParseInt(s[:n], 10, 64)
	return weight, first
}

// dscale returns the number of fractional digits of a canonical numeric.
func dscale(d *apd.Decimal) int64 {
	if d.Exponent >= 0 {
		return 0
	}
	return int64(-d.Exponent)
}

// divScale is Postgres' select_div_scale.
func divScale(x, y *apd.Decimal) int64 {
	var qweight int64
	if !x.IsZero() {
		w1, f1 := nbaseWeight(x)
		w2, f2 := nbaseWeight(y)
		qweight = w1 - w2
		if f1 <= f2 {
			qweight--
		}
	} else {
		w2, _ := nbaseWeight(y)
		qweight = -w2 - 1
	}
	rscale := numericMinSig - qweight*4
	rscale = max(rscale, dscale(x), dscale(y), 0)
	return min(rscale, numericMaxDisp)
}

// numericDiv divides to rscale fractional digits, rounding half away from
// zero. The quotient is first truncated to a few more digits than needed,
// which cannot change the final rounding (a halfway point has at most
// rscale+1 digits), and then rounded.
func numericDiv(x, y *apd.Decimal, rscale int64) (row.Datum, error) {
	intDigits := numDigits(x) + int64(x.Exponent) - (numDigits(y) + int64(y.Exponent)) + 2
	if intDigits > numericMaxWeight+2 {
		return nil, errNumericRange
	}
	ctx := exactCtx(max(intDigits, 1) + rscale + 4)
	ctx.Rounding = apd.RoundDown
	var q apd.Decimal
	if _, err := ctx.Quo(&q, x, y); err != nil {
		return nil, errNumericRange
	}
	return numRound(&q, rscale)
}

// numRound rounds d to scale fractional digits (negative: to tens,
// hundreds, ...), half away from zero.
func numRound(d *apd.Decimal, scale int64) (row.Datum, error) {
	return numResult(quantize(d, int32(-scale), apd.RoundHalfUp))
}

func numericNeg(a row.Datum) (row.Datum, error) {
	n := a.(row.Numeric)
	switch {
	case n == "NaN" || n == "0":
		return n, nil
	case n[0] == '-':
		return n[1:], nil
	}
	return "-" + n, nil
}

func numericAbs(a row.Datum) (row.Datum, error) {
	n := a.(row.Numeric)
	if len(n) > 0 && n[0] == '-' {
		return n[1:], nil
	}
	return n, nil
}

// numericPow is numeric ^ numeric, computed in apd with 16 significant
// digits beyond the integer part, as Postgres' power_var approximately.
func numericPow(a, b row.Datum) (row.Datum, error) {
	an, bn := a.(row.Numeric), b.(row.Numeric)
	if numNaN(an, bn) {
		if an == "1" || bn == "0" {
			return row.Numeric("1"), nil
		}
		return row.Numeric("NaN"), nil
	}
	x, y := numDec(an), numDec(bn)
	if x.IsZero() && y.Negative {
		return nil, errf(CodeInvalidArgumentForPowerFunction, "zero raised to a negative power is undefined")
	}
	integral := y.Exponent >= 0 || quantize(y, 0, apd.RoundDown).Cmp(y) == 0
	if yi, err := y.Int64(); err == nil && integral && yi == int64(int32(yi)) {
		return numericPowInt(x, yi)
	}
	if x.Negative && !integral {
		return nil, errf(CodeInvalidArgumentForPowerFunction, "a negative number raised to a non-integer power yields a complex result")
	}
	// Estimate the result's magnitude to bound the work: |y * log10|x||
	// beyond numeric's range overflows (or underflows to zero).
	xf, _ := x.Float64()
	yf, _ := y.Float64()
	mag := yf * math.Log10(math.Abs(xf))
	if !x.IsZero() && (mag > numericMaxWeight || math.IsInf(mag, 0) || math.IsNaN(mag)) {
		if mag < 0 {
			return row.Numeric("0"), nil
		}
		return nil, errNumericRange
	}
	if !x.IsZero() && mag < -(numericMaxScale+numericMaxWeight) {
		return row.Numeric("0"), nil
	}
	rscale := max(numericMinSig-int64(mag), dscale(x), dscale(y), 0)
	rscale = min(rscale, numericMaxDisp)
	digits := max(int64(math.Ceil(mag)), 1) + rscale + 8
	ctx := exactCtx(digits)
	var r apd.Decimal
	if _, err := ctx.Pow(&r, x, y); err != nil {
		return nil, errNumericRange
	}
	return numRound(&r, rscale)
}

// numericPowInt is numeric ^ integer as Postgres 15's power_var_int:
// 16 fractional digits (or the base's, if more), whatever the magnitude.
func numericPowInt(x *apd.Decimal, y int64) (row.Datum, error) {
	rscale := min(max(numericMinSig, dscale(x)), numericMaxDisp)
	if x.IsZero() {
		if y == 0 {
			return row.Numeric("1"), nil
		}
		return row.Numeric("0"), nil
	}
	xf, _ := x.Float64()
	mag := float64(y) * math.Log10(math.Abs(xf))
	if math.IsInf(xf, 0) || xf == 0 {
		// Beyond float64: estimate from the digits and exponent.
		mag = float64(y) * float64(numDigits(x)+int64(x.Exponent))
	}
	switch {
	case mag > numericMaxWeight:
		return nil, errNumericRange
	case mag < -float64(rscale+1):
		return row.Numeric("0"), nil
	}
	ctx := exactCtx(max(int64(math.Ceil(mag)), 1) + rscale + 8)
	var r apd.Decimal
	if _, err := ctx.Pow(&r, x, apd.New(y, 0)); err != nil {
		return nil, errNumericRange
	}
	return numRound(&r, rscale)
}

// numericSqrt is Postgres' numeric_sqrt: at least 16 significant digits.
func numericSqrt(a row.Datum) (row.Datum, error) {
	n := a.(row.Numeric)
	if n == "NaN" {
		return n, nil
	}
	x := numDec(n)
	if x.Negative && !x.IsZero() {
		return nil, errf(CodeInvalidArgumentForPowerFunction, "cannot take square root of a negative number")
	}
	if x.IsZero() {
		return row.Numeric("0"), nil
	}
	w, _ := nbaseWeight(x)
	sweight := (w+1)*4/2 - 1
	rscale := max(numericMinSig-sweight, dscale(x), 0)
	rscale = min(rscale, numericMaxDisp)
	ctx := exactCtx(numDigits(x)/2 + int64(x.Exponent)/2 + rscale + 8)
	ctx.Rounding = apd.RoundDown
	var r apd.Decimal
	if _, err := ctx.Sqrt(&r, x); err != nil {
		return nil, errNumericRange
	}
	return numRound(&r, rscale)
}

// numericIntegral rounds to an integer with mode: ceil, floor, trunc or
// round (half away from zero).
func numericIntegral(mode apd.Rounder) func(a row.Datum) (row.Datum, error) {
	return func(a row.Datum) (row.Datum, error) {
		n := a.(row.Numeric)
		if n == "NaN" {
			return n, nil
		}
		return numResult(quantize(numDec(n), 0, mode))
	}
}

// numericScaled rounds or truncates to n fractional digits (negative n:
// to the left of the point), as round(numeric, int) and trunc(numeric,
// int).
func numericScaled(mode apd.Rounder) func(a, b row.Datum) (row.Datum, error) {
	return func(a, b row.Datum) (row.Datum, error) {
		n := a.(row.Numeric)
		if n == "NaN" {
			return n, nil
		}
		scale := int64(b.(int32))
		scale = min(max(scale, -numericMaxWeight), numericMaxScale)
		return numResult(quantize(numDec(n), int32(-scale), mode))
	}
}

func numericSign(a row.Datum) (row.Datum, error) {
	n := a.(row.Numeric)
	switch {
	case n == "NaN":
		return n, nil
	case n == "0":
		return row.Numeric("0"), nil
	case n[0] == '-':
		return row.Numeric("-1"), nil
	}
	return row.Numeric("1"), nil
}

// numericExp is exp(numeric), with Postgres' result scale: at least 16
// significant digits.
func numericExp(a row.Datum) (row.Datum, error) {
	n := a.(row.Numeric)
	if n == "NaN" {
		return n, nil
	}
	x := numDec(n)
	xf, _ := x.Float64()
	switch {
	case xf >= 6000:
		return nil, errNumericRange
	case xf <= -6000:
		return row.Numeric("0"), nil
	}
	val := xf * 0.434294481903252 // decimal weight of the result
	rscale := max(numericMinSig-int64(val), dscale(x), 0)
	rscale = min(rscale, numericMaxDisp)
	ctx := exactCtx(max(int64(math.Ceil(val)), 1) + rscale + 8)
	var r apd.Decimal
	if _, err := ctx.Exp(&r, x); err != nil {
		return nil, errNumericRange
	}
	return numRound(&r, rscale)
}

func errLog(x *apd.Decimal) error {
	if x.IsZero() {
		return errf("2201E", "cannot take logarithm of zero")
	}
	return errf("2201E", "cannot take logarithm of a negative number")
}

// lnDweight estimates the decimal weight of ln(x) as Postgres'
// estimate_ln_dweight does.
func lnDweight(x *apd.Decimal) int64 {
	lo, hi := apd.New(9, -1), apd.New(11, -1)
	if x.Cmp(lo) >= 0 && x.Cmp(hi) <= 0 {
		var d apd.Decimal
		if _, err := exactCtx(numDigits(x)+4).Sub(&d, x, apd.New(1, 0)); err != nil || d.IsZero() {
			return 0
		}
		return numDigits(&d) + int64(d.Exponent) - 1
	}
	// ln(x) from the leading digits: x ~ lead * 10^e.
	s := x.Coeff.String()
	e := int64(x.Exponent)
	if len(s) > 15 {
		e += int64(len(s) - 15)
		s = s[:15]
	}
	lead, _ := strconv.ParseFloat(s, 64)
	lnv := math.Log(lead) + float64(e)*math.Ln10
	return int64(math.Log10(math.Abs(lnv)))
}

// numericLn is ln(numeric): at least 16 significant digits.
func numericLn(a row.Datum) (row.Datum, error) {
	n := a.(row.Numeric)
	if n == "NaN" {
		return n, nil
	}
	x := numDec(n)
	if x.Sign() <= 0 {
		return nil, errLog(x)
	}
	dw := lnDweight(x)
	rscale := min(max(numericMinSig-dw, dscale(x), 0), numericMaxDisp)
	ctx := exactCtx(max(dw+1, 1) + rscale + 8)
	var r apd.Decimal
	if _, err := ctx.Ln(&r, x); err != nil {
		return nil, errNumericRange
	}
	return numRound(&r, rscale)
}

// numericLog is log(base, x) for numerics; log(x) is log(10, x).
func numericLog(b, a row.Datum) (row.Datum, error) {
	bn, n := b.(row.Numeric), a.(row.Numeric)
	if numNaN(bn, n) {
		return row.Numeric("NaN"), nil
	}
	base, x := numDec(bn), numDec(n)
	if base.Sign() <= 0 {
		return nil, errLog(base)
	}
	if x.Sign() <= 0 {
		return nil, errLog(x)
	}
	dw := lnDweight(x) - lnDweight(base)
	rscale := min(max(numericMinSig-dw, dscale(base), dscale(x), 0), numericMaxDisp)
	prec := max(dw+1, 1) + rscale + 16
	ctx := exactCtx(prec)
	var lb, lx, r apd.Decimal
	if _, err := ctx.Ln(&lb, base); err != nil {
		return nil, errNumericRange
	}
	if lb.IsZero() {
		return nil, errDivisionByZero
	}
	if _, err := ctx.Ln(&lx, x); err != nil {
		return nil, errNumericRange
	}
	if _, err := ctx.Quo(&r, &lx, &lb); err != nil {
		return nil, errNumericRange
	}
	return numRound(&r, rscale)
}
