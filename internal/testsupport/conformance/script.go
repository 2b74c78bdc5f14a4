package conformance

import (
	"fmt"
	"os"
	"strings"
)

// Script is a parsed conformance script: its header options and its cases
// in file order.
type Script struct {
	Path  string
	Cases []*Case
	// KnownFailure marks a script whose mismatches are reported but do not
	// fail the test (a "# known-failure" line in the header).
	KnownFailure bool
	// Header holds "# key: value" lines of the leading comment block.
	Header map[string]string
	// trailer is the text after the last case, kept for rewriting.
	trailer string
}

// Case is one directive with its input and expected output.
type Case struct {
	Line      int    // 1-based line of the directive
	Directive string // the whole directive line
	Cmd       string
	Args      []Arg
	Input     string // the SQL, lines joined by "\n"
	Expected  string // without the final newline
	// pre is the text (comments, blank lines) before the directive, kept
	// verbatim by a rewrite.
	pre string
}

// Arg is one directive argument: key=value, or a bare flag (Value empty).
type Arg struct {
	Key, Value string
}

// Arg returns the value of key and whether it was given.
func (c *Case) Arg(key string) (string, bool) {
	for _, a := range c.Args {
		if a.Key == key {
			return a.Value, true
		}
	}
	return "", false
}

// Flag reports whether the bare flag or key was given.
func (c *Case) Flag(key string) bool {
	_, ok := c.Arg(key)
	return ok
}

// args are the text values of $1, $2, ... given as args=V1,V2 (for the
// extended protocol); none without.
func (c *Case) args() []string {
	v, ok := c.Arg("args")
	if !ok {
		return nil
	}
	return strings.Split(v, ",")
}

// OnPath reports whether the case runs on the fast path (fast) or the
// dataflow path: path=fast and path=dataflow restrict a case to one, for
// the behaviours SUBSCRIBE-SPEC.md lets differ (a slow client).
func (c *Case) OnPath(fast bool) bool {
	switch v, _ := c.Arg("path"); v {
	case "fast":
		return fast
	case "dataflow":
		return !fast
	}
	return true
}

// Pos names the case in messages: file:line directive.
func (c *Case) Pos(path string) string {
	return fmt.Sprintf("%s:%d: %s", path, c.Line, c.Directive)
}

// ParseFile reads and parses a script.
func ParseFile(path string) (*Script, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, string(b))
}

// Parse parses a script's text (see doc.go for the format).
func Parse(path, text string) (*Script, error) {
	s := &Script{Path: path, Header: map[string]string{}}
	lines := strings.Split(text, "\n")
	// A trailing newline leaves an empty last element that is not a line.
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	var pre strings.Builder
	header := true
	i := 0
	for i < len(lines) {
		line := lines[i]
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			if header && strings.HasPrefix(trimmed, "#") {
				body := strings.TrimSpace(strings.TrimPrefix(trimmed, "#"))
				if body == "known-failure" {
					s.KnownFailure = true
				} else if k, v, ok := strings.Cut(body, ":"); ok && !strings.Contains(k, " ") {
					s.Header[strings.TrimSpace(k)] = strings.TrimSpace(v)
				}
			}
			if trimmed == "" && len(s.Cases) == 0 {
				header = false
			}
			pre.WriteString(line + "\n")
			i++
			continue
		}
		header = false
		c := &Case{Line: i + 1, Directive: trimmed, pre: pre.String()}
		pre.Reset()
		fields := strings.Fields(trimmed)
		c.Cmd = fields[0]
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(f, "=")
			c.Args = append(c.Args, Arg{Key: k, Value: v})
		}
		i++
		var input []string
		for i < len(lines) && lines[i] != "----" {
			input = append(input, lines[i])
			i++
		}
		if i == len(lines) {
			return nil, fmt.Errorf("%s:%d: %s: missing ----", path, c.Line, c.Cmd)
		}
		c.Input = strings.Join(input, "\n")
		i++ // ----
		var out []string
		if i < len(lines) && lines[i] == "----" {
			// Long form: the output may hold blank lines and ends at a
			// "----" line followed by another "----".
			i++
			for {
				if i+1 >= len(lines) {
					return nil, fmt.Errorf("%s:%d: %s: unterminated ---- ---- output", path, c.Line, c.Cmd)
				}
				if lines[i] == "----" && lines[i+1] == "----" {
					i += 2
					break
				}
				out = append(out, lines[i])
				i++
			}
		} else {
			for i < len(lines) && lines[i] != "" {
				out = append(out, lines[i])
				i++
			}
		}
		c.Expected = strings.Join(out, "\n")
		s.Cases = append(s.Cases, c)
	}
	s.trailer = pre.String()
	return s, nil
}

// Rewrite returns the script's text with each case's expected output
// replaced by outputs[c] (when present), comments and layout unchanged.
// The blank line that ends a case belongs to the text before the next one,
// so it is kept as it was.
func (s *Script) Rewrite(outputs map[*Case]string) string {
	var b strings.Builder
	for i, c := range s.Cases {
		// The short form ends at a blank line or the end of the text: it
		// cannot be followed directly by the next case or a comment (the
		// long form can).
		after, last := s.trailer, i == len(s.Cases)-1
		if !last {
			after = s.Cases[i+1].pre
		}
		endsShort := strings.HasPrefix(after, "\n") || (last && after == "")
		b.WriteString(c.pre)
		b.WriteString(c.Directive + "\n")
		if c.Input != "" {
			b.WriteString(c.Input + "\n")
		}
		out, ok := outputs[c]
		if !ok {
			out = c.Expected
		}
		if needsLongForm(out) || !endsShort {
			b.WriteString("----\n----\n" + out + "\n----\n----\n")
			continue
		}
		b.WriteString("----\n")
		if out != "" {
			b.WriteString(out + "\n")
		}
	}
	b.WriteString(s.trailer)
	return b.String()
}

// needsLongForm reports whether an output cannot be written as lines up to
// a blank line: it has blank lines, or starts with a "----" line.
func needsLongForm(out string) bool {
	return strings.Contains(out, "\n\n") || strings.HasPrefix(out, "\n") || strings.HasSuffix(out, "\n") ||
		out == "----" || strings.HasPrefix(out, "----\n")
}
