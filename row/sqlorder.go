package row

import "strings"

// CompareSQL orders two datums of the same type as SQL's ORDER BY does:
// numerics by value (Compare orders them by canonical text, which is only
// deterministic). NULL sorts first; callers apply NULLS LAST themselves.
func CompareSQL(a, b Datum) int {
	if x, ok := a.(Numeric); ok {
		if y, ok := b.(Numeric); ok {
			return compareNumeric(x, y)
		}
	}
	return CompareDatum(a, b)
}

// compareNumeric compares canonical decimals without parsing them into
// big numbers in the common case. NaN sorts above everything, as in
// PostgreSQL.
func compareNumeric(a, b Numeric) int {
	if a == b {
		return 0
	}
	if a == "NaN" || b == "NaN" {
		if a == "NaN" {
			return 1
		}
		return -1
	}
	an, bn := strings.HasPrefix(string(a), "-"), strings.HasPrefix(string(b), "-")
	if an != bn {
		if an {
			return -1
		}
		return 1
	}
	c := compareAbs(strings.TrimPrefix(string(a), "-"), strings.TrimPrefix(string(b), "-"))
	if an {
		return -c
	}
	return c
}

// compareAbs compares two non-negative canonical decimal texts.
func compareAbs(a, b string) int {
	ai, af, _ := strings.Cut(a, ".")
	bi, bf, _ := strings.Cut(b, ".")
	if len(ai) != len(bi) {
		if len(ai) < len(bi) {
			return -1
		}
		return 1
	}
	if c := strings.Compare(ai, bi); c != 0 {
		return c
	}
	return strings.Compare(af, bf)
}
