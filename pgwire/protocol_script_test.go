package pgwire

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgproto3/v2"
)

// Protocol scripts (testdata/protocol/*.txt) are message-level traces run
// by TestProtocolScripts, each on a new connection to a server with the
// fake backend:
//
//	# A comment.
//	script PortalRowLimit ended=0
//	> Parse "" "select 10"
//	> Execute "p" 3
//	> Sync
//	ParseComplete
//	DataRow 1
//	ReadyForQuery I
//
// "script NAME [ended=N]" starts a script; N is how many long-running
// results must have ended once the session closed (0 if absent). Lines
// starting with "> " are frontend messages; a run of them is sent in one
// write, and the lines after it, up to the next "> " or script, are the
// backend messages expected back, as summarize renders them. Frontend
// messages are written as their pgproto3 type name and fields; strings are
// Go-quoted:
//
//	Query "sql"                      Parse "name" "sql"
//	Bind "portal" "stmt" [param="v"|param=NULL]... [pformat=N]... [rformat=N]...
//	Execute "portal" maxrows         Describe S|P "name"      Close S|P "name"
//	Sync   Flush   CopyDone          CopyData "data"          CopyFail "message"
//	FunctionCall oid

// protocolScript is one script of a protocol script file.
type protocolScript struct {
	name  string
	pos   string // file:line of its script line
	ended int
	steps []step
}

// step is one exchange of a protocol script: messages sent in one write,
// messages expected back.
type step struct {
	send []pgproto3.FrontendMessage
	want []string
}

// parseProtocolFile reads the scripts of one file.
func parseProtocolFile(path string) ([]protocolScript, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var scripts []protocolScript
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		pos := fmt.Sprintf("%s:%d", path, n)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if name, ok := strings.CutPrefix(line, "script "); ok {
			s := protocolScript{pos: pos}
			fields := strings.Fields(name)
			s.name = fields[0]
			for _, opt := range fields[1:] {
				v, ok := strings.CutPrefix(opt, "ended=")
				if !ok {
					return nil, fmt.Errorf("%s: unknown script option %q", pos, opt)
				}
				if s.ended, err = strconv.Atoi(v); err != nil {
					return nil, fmt.Errorf("%s: ended: %w", pos, err)
				}
			}
			scripts = append(scripts, s)
			continue
		}
		if len(scripts) == 0 {
			return nil, fmt.Errorf("%s: %q before the first script line", pos, line)
		}
		s := &scripts[len(scripts)-1]
		if msg, ok := strings.CutPrefix(line, "> "); ok {
			m, err := parseFrontend(msg)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", pos, err)
			}
			if len(s.steps) == 0 || len(s.steps[len(s.steps)-1].want) > 0 {
				s.steps = append(s.steps, step{})
			}
			st := &s.steps[len(s.steps)-1]
			st.send = append(st.send, m)
			continue
		}
		if len(s.steps) == 0 {
			return nil, fmt.Errorf("%s: expected message %q before any message sent", pos, line)
		}
		st := &s.steps[len(s.steps)-1]
		st.want = append(st.want, line)
	}
	return scripts, sc.Err()
}

// parseFrontend parses one frontend message line.
func parseFrontend(line string) (pgproto3.FrontendMessage, error) {
	toks, err := tokenize(line)
	if err != nil {
		return nil, err
	}
	typ, args := toks[0], toks[1:]
	want := func(n int) error {
		if len(args) != n {
			return fmt.Errorf("%s takes %d arguments, got %d", typ, n, len(args))
		}
		return nil
	}
	switch typ {
	case "Query":
		if err := want(1); err != nil {
			return nil, err
		}
		return &pgproto3.Query{String: args[0]}, nil
	case "Parse":
		if err := want(2); err != nil {
			return nil, err
		}
		return &pgproto3.Parse{Name: args[0], Query: args[1]}, nil
	case "Bind":
		if len(args) < 2 {
			return nil, fmt.Errorf("Bind takes a portal and a statement")
		}
		b := &pgproto3.Bind{DestinationPortal: args[0], PreparedStatement: args[1]}
		for _, opt := range args[2:] {
			key, val, ok := strings.Cut(opt, "=")
			if !ok {
				return nil, fmt.Errorf("Bind option %q: want key=value", opt)
			}
			switch key {
			case "param":
				if val == "NULL" {
					b.Parameters = append(b.Parameters, nil)
					continue
				}
				if val, err = unquote(val); err != nil {
					return nil, err
				}
				b.Parameters = append(b.Parameters, []byte(val))
			case "pformat", "rformat":
				n, err := strconv.ParseInt(val, 10, 16)
				if err != nil {
					return nil, fmt.Errorf("Bind %s: %w", key, err)
				}
				if key == "pformat" {
					b.ParameterFormatCodes = append(b.ParameterFormatCodes, int16(n))
				} else {
					b.ResultFormatCodes = append(b.ResultFormatCodes, int16(n))
				}
			default:
				return nil, fmt.Errorf("unknown Bind option %q", key)
			}
		}
		return b, nil
	case "Execute":
		if err := want(2); err != nil {
			return nil, err
		}
		max, err := strconv.ParseUint(args[1], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("Execute max rows: %w", err)
		}
		return &pgproto3.Execute{Portal: args[0], MaxRows: uint32(max)}, nil
	case "Describe", "Close":
		if err := want(2); err != nil {
			return nil, err
		}
		if args[0] != "S" && args[0] != "P" {
			return nil, fmt.Errorf("%s kind %q: want S or P", typ, args[0])
		}
		if typ == "Describe" {
			return &pgproto3.Describe{ObjectType: args[0][0], Name: args[1]}, nil
		}
		return &pgproto3.Close{ObjectType: args[0][0], Name: args[1]}, nil
	case "Sync", "Flush", "CopyDone":
		if err := want(0); err != nil {
			return nil, err
		}
		return map[string]pgproto3.FrontendMessage{"Sync": &pgproto3.Sync{}, "Flush": &pgproto3.Flush{}, "CopyDone": &pgproto3.CopyDone{}}[typ], nil
	case "CopyData":
		if err := want(1); err != nil {
			return nil, err
		}
		return &pgproto3.CopyData{Data: []byte(args[0])}, nil
	case "CopyFail":
		if err := want(1); err != nil {
			return nil, err
		}
		return &pgproto3.CopyFail{Message: args[0]}, nil
	case "FunctionCall":
		if err := want(1); err != nil {
			return nil, err
		}
		oid, err := strconv.ParseUint(args[0], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("FunctionCall oid: %w", err)
		}
		return &pgproto3.FunctionCall{Function: uint32(oid)}, nil
	}
	return nil, fmt.Errorf("unknown frontend message %q", typ)
}

// tokenize splits a line at spaces outside Go-quoted strings and unquotes
// the tokens that are whole quoted strings; a quote inside a token (the
// value of key="v") stays quoted.
func tokenize(line string) ([]string, error) {
	var toks []string
	for i := 0; i < len(line); {
		if line[i] == ' ' {
			i++
			continue
		}
		start := i
		for i < len(line) && line[i] != ' ' {
			if line[i] == '"' {
				q, err := strconv.QuotedPrefix(line[i:])
				if err != nil {
					return nil, fmt.Errorf("bad quoted string at %q", line[i:])
				}
				i += len(q)
				continue
			}
			i++
		}
		tok := line[start:i]
		if strings.HasPrefix(tok, `"`) {
			var err error
			if tok, err = unquote(tok); err != nil {
				return nil, err
			}
		}
		toks = append(toks, tok)
	}
	if len(toks) == 0 {
		return nil, fmt.Errorf("empty message line")
	}
	return toks, nil
}

func unquote(s string) (string, error) {
	u, err := strconv.Unquote(s)
	if err != nil {
		return "", fmt.Errorf("bad quoted string %s", s)
	}
	return u, nil
}

func TestParseFrontend(t *testing.T) {
	for _, tc := range []struct {
		line string
		want pgproto3.FrontendMessage // nil: an error
	}{
		{`Query "select 1; select 2"`, &pgproto3.Query{String: "select 1; select 2"}},
		{`Query ""`, &pgproto3.Query{}},
		{`Parse "s" "echo $1"`, &pgproto3.Parse{Name: "s", Query: "echo $1"}},
		{`Bind "p" "s" param="a b" param=NULL pformat=1 rformat=0 rformat=1`, &pgproto3.Bind{DestinationPortal: "p", PreparedStatement: "s",
			Parameters: [][]byte{[]byte("a b"), nil}, ParameterFormatCodes: []int16{1}, ResultFormatCodes: []int16{0, 1}}},
		{`Execute "" 3`, &pgproto3.Execute{MaxRows: 3}},
		{`Describe P "p"`, &pgproto3.Describe{ObjectType: 'P', Name: "p"}},
		{`Close S "s"`, &pgproto3.Close{ObjectType: 'S', Name: "s"}},
		{`CopyData "a\nb"`, &pgproto3.CopyData{Data: []byte("a\nb")}},
		{`CopyFail "boom"`, &pgproto3.CopyFail{Message: "boom"}},
		{`FunctionCall 1`, &pgproto3.FunctionCall{Function: 1}},
		{`Sync`, &pgproto3.Sync{}},
		{`Query`, nil},
		{`Query "unterminated`, nil},
		{`Execute "p" -1`, nil},
		{`Describe X "p"`, nil},
		{`Bind "p" "s" param`, nil},
		{`Bind "p" "s" color=red`, nil},
		{`Sync now`, nil},
		{`Terminate`, nil},
	} {
		got, err := parseFrontend(tc.line)
		if tc.want == nil {
			if err == nil {
				t.Errorf("parseFrontend(%s) = %#v, want an error", tc.line, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseFrontend(%s): %v", tc.line, err)
			continue
		}
		g, _ := got.Encode(nil)
		w, _ := tc.want.Encode(nil)
		if !bytes.Equal(g, w) {
			t.Errorf("parseFrontend(%s) = %#v, want %#v", tc.line, got, tc.want)
		}
	}
}

// FuzzParseFrontend: any line parses to an encodable message or an error.
func FuzzParseFrontend(f *testing.F) {
	for _, s := range []string{`Query "x"`, `Bind "p" "s" param="a" param=NULL pformat=1`, `Execute "p" 4`, `Describe S "s"`, `CopyData "\x00"`, `Query "\"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		m, err := parseFrontend(line)
		if err != nil {
			return
		}
		if _, err := m.Encode(nil); err != nil {
			t.Errorf("parseFrontend(%q) = %#v, which does not encode: %v", line, m, err)
		}
	})
}
