package expr

import (
	"regexp"
	"strings"

	"github.com/shardtail/shardtail/row"
)

// likeKind classifies a LIKE pattern so that the common shapes avoid the
// general matcher: 'abc', 'abc%', '%abc', '%abc%'.
type likeKind uint8

const (
	likeExact likeKind = iota
	likePrefix
	likeSuffix
	likeContains
	likeGeneral
)

// likeElem is one element of a general pattern: a literal character, any
// one character (_), any sequence (%), or a dangling escape at the end.
type likeElem struct {
	r    rune
	kind uint8 // 0 literal, 1 any one, 2 any sequence, 3 dangling escape
}

// likePattern is a compiled LIKE pattern. Backslash escapes the next
// character; a pattern may not end with one (22025).
type likePattern struct {
	kind  likeKind
	lit   string
	elems []likeElem
	fold  bool // ILIKE: both sides lower-cased
}

func compileLike(pat string, fold bool) (*likePattern, error) {
	if fold {
		pat = strings.ToLower(pat)
	}
	var elems []likeElem
	escaped := false
	for _, r := range pat {
		switch {
		case escaped:
			elems = append(elems, likeElem{r: r})
			escaped = false
		case r == '\\':
			escaped = true
		case r == '%':
			// Consecutive % are one.
			if n := len(elems); n == 0 || elems[n-1].kind != 2 {
				elems = append(elems, likeElem{kind: 2})
			}
		case r == '_':
			elems = append(elems, likeElem{kind: 1})
		default:
			elems = append(elems, likeElem{r: r})
		}
	}
	if escaped {
		// Postgres fails only if matching reaches the dangling escape.
		return &likePattern{fold: fold, elems: append(elems, likeElem{kind: 3}), kind: likeGeneral}, nil
	}
	p := &likePattern{fold: fold, elems: elems, kind: likeGeneral}
	// Recognize literal, literal%, %literal and %literal%.
	lo, hi := 0, len(elems)
	leading := lo < hi && elems[lo].kind == 2
	if leading {
		lo++
	}
	trailing := hi > lo && elems[hi-1].kind == 2
	if trailing {
		hi--
	}
	var lit strings.Builder
	for _, e := range elems[lo:hi] {
		if e.kind != 0 {
			return p, nil
		}
		lit.WriteRune(e.r)
	}
	p.lit = lit.String()
	switch {
	case leading && trailing:
		p.kind = likeContains
	case leading:
		p.kind = likeSuffix
	case trailing:
		p.kind = likePrefix
	default:
		p.kind = likeExact
	}
	return p, nil
}

func (p *likePattern) match(s string) (bool, error) {
	if p.fold {
		s = strings.ToLower(s)
	}
	switch p.kind {
	case likeExact:
		return s == p.lit, nil
	case likePrefix:
		return strings.HasPrefix(s, p.lit), nil
	case likeSuffix:
		return strings.HasSuffix(s, p.lit), nil
	case likeContains:
		return strings.Contains(s, p.lit), nil
	}
	return matchElems(p.elems, []rune(s))
}

// matchElems is the classic wildcard match with one backtracking point:
// on a mismatch, the last % absorbs one more character.
func matchElems(p []likeElem, s []rune) (bool, error) {
	i, j := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case j < len(p) && p[j].kind == 3:
			return false, errLikeEscape
		case j < len(p) && p[j].kind == 2:
			star, mark = j, i
			j++
		case j < len(p) && (p[j].kind == 1 || p[j].r == s[i]):
			i++
			j++
		case star >= 0:
			j = star + 1
			mark++
			i = mark
		default:
			return false, nil
		}
	}
	for j < len(p) && p[j].kind == 2 {
		j++
	}
	return j == len(p), nil
}

// matcher is a compiled pattern: a LIKE pattern or a regular expression.
type matcher interface {
	match(s string) (bool, error)
}

// patternMatch is a pattern operator: [NOT] [I]LIKE, or the regular
// expression matches ~, ~*, !~ and !~*. compile turns a pattern into its
// matcher; a constant pattern is compiled once, at planning.
type patternMatch struct {
	op      string
	x, pat  Expr
	fold    bool // case-insensitive: ILIKE, ~*
	not     bool
	compile func(pat string, fold bool) (matcher, error)
	cached  matcher
}

func (m *patternMatch) Type() Type     { return TypeBool }
func (m *patternMatch) Nullable() bool { return m.x.Nullable() || m.pat.Nullable() }
func (m *patternMatch) String() string {
	return "(" + m.x.String() + " " + m.op + " " + m.pat.String() + ")"
}
func (m *patternMatch) Eval(ctx *EvalContext, r row.Row) (row.Datum, error) {
	x, err := m.x.Eval(ctx, r)
	if err != nil {
		return nil, err
	}
	pat, err := m.pat.Eval(ctx, r)
	if err != nil || x == nil || pat == nil {
		return nil, err
	}
	p := m.cached
	if p == nil {
		if p, err = m.compile(pat.(string), m.fold); err != nil {
			return nil, err
		}
	}
	ok, err := p.match(x.(string))
	if err != nil {
		return nil, err
	}
	return ok != m.not, nil
}

// compileLikeMatcher is compileLike as patternMatch compiles.
func compileLikeMatcher(pat string, fold bool) (matcher, error) {
	p, err := compileLike(pat, fold)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// regexMatcher is a regular expression in Go's RE2 syntax (Postgres' ARE
// features such as back-references are not available).
type regexMatcher struct{ re *regexp.Regexp }

func (m regexMatcher) match(s string) (bool, error) { return m.re.MatchString(s), nil }

func compileRegex(pat string, fold bool) (matcher, error) {
	if fold {
		pat = "(?i)" + pat
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return nil, errf(CodeInvalidRegularExpression, "invalid regular expression: %v", err)
	}
	return regexMatcher{re}, nil
}
