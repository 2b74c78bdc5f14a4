package conformance

import (
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"
)

// stmtState follows the statements of one query text as their results
// arrive: which subscribe stream rows belong to, the columns, the COPY
// format.
type stmtState struct {
	stmts    []stmtInfo
	idx      int
	fields   []pgproto3.FieldDescription
	copying  bool
	copyDone bool
	copyBin  *binaryCopyReader
	copyOIDs []uint32
}

// stmtInfo is what the runner derives from one statement's text.
type stmtInfo struct {
	stream  *streamCheck // nil: not a subscribe
	ordered bool         // WITHIN TIMESTAMP ORDER BY
	csv     bool         // COPY ... FORMAT csv
}

func (st *stmtState) cur() stmtInfo {
	if st.idx < len(st.stmts) {
		return st.stmts[st.idx]
	}
	return stmtInfo{}
}

// next moves to the next statement's results.
func (st *stmtState) next() {
	st.idx++
	st.fields = nil
	st.copying, st.copyDone = false, false
	st.copyBin = nil
}

func (r *runner) setPending(wc *wireConn, st *stmtState) {
	if r.pending == nil {
		r.pending = map[string]*stmtState{}
	}
	r.pending[wc.name] = st
}

func (r *runner) pendingStmt(wc *wireConn) *stmtState { return r.pending[wc.name] }

var (
	withinOrderRe = regexp.MustCompile(`(?i)\bwithin\s+timestamp\s+order\s+by\b`)
	declareRe     = regexp.MustCompile(`(?is)^\s*declare\s+("[^"]+"|\w+)\s+cursor\b.*\bsubscribe\b`)
	fetchRe       = regexp.MustCompile(`(?is)^\s*fetch\b`)
	fetchWithRe   = regexp.MustCompile(`(?is)\bwith\s*\(.*$`)
	subscribeRe   = regexp.MustCompile(`(?is)^\s*(subscribe\b|copy\s*\(\s*subscribe\b)`)
	csvRe         = regexp.MustCompile(`(?i)\bformat\s*=?\s*'?csv\b`)
	binaryCopyRe  = regexp.MustCompile(`(?i)\bformat\s*=?\s*'?binary\b`)
)

// newStmt classifies the statements of sql. A DECLARE of a SUBSCRIBE
// cursor starts a new stream that the cursor's FETCHes continue.
func (r *runner) newStmt(wc *wireConn, sql string) *stmtState {
	st := &stmtState{}
	for _, s := range splitStatements(sql) {
		var info stmtInfo
		switch {
		case declareRe.MatchString(s):
			name := cursorName(declareRe.FindStringSubmatch(s)[1])
			r.cursors[wc.name+"/"+name] = &cursorInfo{ordered: withinOrderRe.MatchString(s), stream: &streamCheck{}}
		case fetchRe.MatchString(s):
			words := strings.Fields(strings.TrimSuffix(strings.TrimSpace(fetchWithRe.ReplaceAllString(s, "")), ";"))
			if ci := r.cursors[wc.name+"/"+cursorName(words[len(words)-1])]; ci != nil {
				info = stmtInfo{stream: ci.stream, ordered: ci.ordered}
			}
		case subscribeRe.MatchString(s):
			info = stmtInfo{stream: &streamCheck{}, ordered: withinOrderRe.MatchString(s), csv: csvRe.MatchString(s)}
		}
		st.stmts = append(st.stmts, info)
	}
	return st
}

func cursorName(s string) string {
	if strings.HasPrefix(s, `"`) {
		return strings.Trim(s, `"`)
	}
	return strings.ToLower(s)
}

// splitStatements splits SQL text at semicolons outside quotes.
func splitStatements(sql string) []string {
	var out []string
	var quote rune
	start := 0
	for i, ch := range sql {
		switch {
		case quote != 0:
			if ch == quote {
				quote = 0
			}
		case ch == '\'' || ch == '"':
			quote = ch
		case ch == ';':
			if s := strings.TrimSpace(sql[start:i]); s != "" {
				out = append(out, s)
			}
			start = i + 1
		}
	}
	if s := strings.TrimSpace(sql[start:]); s != "" {
		out = append(out, s)
	}
	return out
}

// innerQuery returns the statement inside COPY ( ... ).
func innerQuery(sql string) string {
	open := strings.Index(sql, "(")
	if open < 0 {
		return ""
	}
	depth := 0
	for i := open; i < len(sql); i++ {
		switch sql[i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return sql[open+1 : i]
			}
		}
	}
	return ""
}
