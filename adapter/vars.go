package adapter

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/shardtail/shardtail/catalog"
	"github.com/shardtail/shardtail/pgwire"
	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/sql"
)

// Session variables with their defaults. Materialize's defaults where it
// has them, so drivers and tools see what they expect.
var varDefaults = map[string]string{
	"application_name":                   "",
	"client_encoding":                    "UTF8",
	"client_min_messages":                "notice",
	"cluster":                            "quickstart",
	"database":                           "materialize",
	"datestyle":                          "ISO, MDY",
	"extra_float_digits":                 "3",
	"integer_datetimes":                  "on",
	"intervalstyle":                      "postgres",
	"max_identifier_length":              strconv.Itoa(sql.MaxIdentifierLength),
	"max_result_size":                    "1GB",
	"search_path":                        "public",
	"server_encoding":                    "UTF8",
	"server_version":                     "9.5.0",
	"server_version_num":                 "90500",
	"standard_conforming_strings":        "on",
	"statement_timeout":                  "0",
	"timezone":                           "UTC",
	"transaction_isolation":              "strict serializable",
	"enable_subscribe_persist_fast_path": "on",
	"subscribe_max_buffered_bytes":       strconv.Itoa(DefaultMaxBufferedBytes),
	"is_superuser":                       "off",
	"mz_version":                         "",
	"statement_logging_sample_rate":      "1",
}

// reportedVars are sent as ParameterStatus at startup and when SET.
var reportedVars = []string{"application_name", "client_encoding", "datestyle", "integer_datetimes",
	"intervalstyle", "is_superuser", "server_encoding", "server_version", "standard_conforming_strings", "timezone"}

// varDisplayNames maps lower-case names to the case Postgres reports.
var varDisplayNames = map[string]string{"datestyle": "DateStyle", "timezone": "TimeZone", "intervalstyle": "IntervalStyle"}

// systemVars may be set with ALTER SYSTEM; their session default follows.
var systemVars = map[string]bool{"enable_subscribe_persist_fast_path": true, "subscribe_max_buffered_bytes": true, "max_result_size": true,
	"statement_logging_sample_rate": true}

func displayName(name string) string {
	if d, ok := varDisplayNames[name]; ok {
		return d
	}
	return name
}

// getVar returns a variable's value: the session's if SET, else ALTER
// SYSTEM's for system variables, else the default.
func (s *Session) getVar(name string) (string, bool) {
	name = strings.ToLower(name)
	if _, set := s.vars.get(name); systemVars[name] && !set {
		if v, ok := s.c.systemVar(name); ok {
			return v, true
		}
		if name == "enable_subscribe_persist_fast_path" && !s.c.cfg.FastPath {
			return "off", true
		}
	}
	switch name {
	case "mz_version":
		return s.c.cfg.Version, true
	case "is_superuser":
		if r := s.c.catalog.State().Roles[s.user]; r != nil && r.Superuser {
			return "on", true
		}
	}
	v, ok := s.vars.get(name)
	if !ok {
		v, ok = varDefaults[name]
	}
	return v, ok
}

// sessionVar is a session variable's own value: SET, else the default.
func (s *Session) sessionVar(name string) string {
	if v, ok := s.vars.get(name); ok {
		return v
	}
	return varDefaults[name]
}

func parseBoolVar(name, v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "on", "true", "t", "yes", "y", "1":
		return true, nil
	case "off", "false", "f", "no", "n", "0":
		return false, nil
	}
	return false, errorf(codeInvalidParamValue, "parameter %q requires a Boolean value", name)
}

// fastPath reports whether eligible SUBSCRIBEs take the fast path.
func (s *Session) fastPath() bool {
	v, _ := s.getVar("enable_subscribe_persist_fast_path")
	b, _ := parseBoolVar("", v)
	return b
}

// maxBufferedBytes is subscribe_max_buffered_bytes.
func (s *Session) maxBufferedBytes() int64 {
	v, _ := s.getVar("subscribe_max_buffered_bytes")
	n, err := parseBytes(v)
	if err != nil || n <= 0 {
		return DefaultMaxBufferedBytes
	}
	return n
}

// maxResultSize is max_result_size.
func (s *Session) maxResultSize() int64 {
	v, _ := s.getVar("max_result_size")
	n, err := parseBytes(v)
	if err != nil || n <= 0 {
		return 1 << 30
	}
	return n
}

// sampleRate is statement_logging_sample_rate: the fraction of statements
// the statement log records.
func (s *Session) sampleRate() float64 {
	v, _ := s.getVar("statement_logging_sample_rate")
	r, err := parseSampleRate(v)
	if err != nil {
		return 1
	}
	return r
}

// parseSampleRate parses a sample rate, a number in [0, 1].
func parseSampleRate(v string) (float64, error) {
	r, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || !(r >= 0 && r <= 1) {
		return 0, errorf(codeInvalidParamValue, "parameter \"statement_logging_sample_rate\" requires a number between 0 and 1, got %q", v)
	}
	return r, nil
}

// parseBytes parses a byte size: 1024, '128MB', '1GB', '64kB'.
func parseBytes(v string) (int64, error) {
	v = strings.TrimSpace(strings.ToUpper(v))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"GIB", 1 << 30}, {"MIB", 1 << 20}, {"KIB", 1 << 10}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(v, u.suffix) {
			mult = u.m
			v = strings.TrimSpace(strings.TrimSuffix(v, u.suffix))
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, err
	}
	return n * mult, nil
}

func validateVar(name, value string) error {
	switch name {
	case "enable_subscribe_persist_fast_path":
		_, err := parseBoolVar(name, value)
		return err
	case "standard_conforming_strings":
		// Backslashes in '' strings are always literal: a client told
		// "off" would double them (libpq's PQescapeStringConn).
		if on, err := parseBoolVar(name, value); err != nil || !on {
			return onlyValue(name, value, "on")
		}
	case "subscribe_max_buffered_bytes", "max_result_size":
		if n, err := parseBytes(value); err != nil || n < 0 {
			return invalidValue(name, value)
		}
	case "statement_logging_sample_rate":
		if _, err := parseSampleRate(value); err != nil {
			return err
		}
	case "server_version", "server_version_num", "server_encoding", "integer_datetimes", "mz_version", "is_superuser", "max_identifier_length":
		return errorf(codeCantChangeRuntime, "parameter %q cannot be changed", name)
	case "client_encoding":
		if u := strings.ToUpper(strings.ReplaceAll(value, "-", "")); u != "UTF8" {
			return onlyValue("client_encoding", value, "UTF8")
		}
	case "timezone":
		if !utcNames[strings.ToLower(strings.TrimSpace(value))] {
			return onlyValue("TimeZone", value, "UTC")
		}
	case "datestyle":
		// PostgreSQL's form: a comma-separated list of an output format
		// and a field order, either or both.
		for _, part := range strings.Split(value, ",") {
			if p := strings.ToUpper(strings.TrimSpace(part)); p != "ISO" && p != "MDY" {
				return onlyValue("DateStyle", value, "ISO, MDY")
			}
		}
	case "intervalstyle":
		if !strings.EqualFold(strings.TrimSpace(value), "postgres") {
			return onlyValue("IntervalStyle", value, "postgres")
		}
	}
	return nil
}

// utcNames are the TimeZone values that name UTC: times are read and
// written in UTC only, so a session may not claim another zone (its
// timestamptz values would not be shown in it).
var utcNames = map[string]bool{"utc": true, "etc/utc": true, "gmt": true, "etc/gmt": true, "uct": true, "etc/uct": true,
	"universal": true, "etc/universal": true, "zulu": true, "etc/zulu": true, "z": true, "gmt0": true, "etc/gmt0": true,
	"+00:00": true, "-00:00": true, "+00": true, "00:00": true, "0": true, "+0": true}

// onlyValue is the error of a SET of a parameter to a value other than the
// one the server supports. (A startup parameter's invalid value is not an
// error: the session keeps the default, as Materialize does.)
func onlyValue(name, value, supported string) *Error {
	e := invalidValue(name, value)
	e.hint = fmt.Sprintf("shardtail supports only %s.", supported)
	return e
}

func invalidValue(name, value string) *Error {
	return errorf(codeInvalidParamValue, "invalid value for parameter %q: %q", name, value)
}

func setValueText(values []sql.Expr) (string, error) {
	parts := make([]string, 0, len(values))
	for _, v := range values {
		t, ok := sql.ValueText(v)
		if !ok {
			return "", errorf(codeInvalidParamValue, "invalid value %s", v)
		}
		parts = append(parts, t)
	}
	return strings.Join(parts, ", "), nil
}

func (s *Session) planSet(ctx context.Context, st *sql.SetVariable) (*plan, error) {
	name := strings.ToLower(st.Name)
	if _, known := varDefaults[name]; !known && !strings.Contains(name, ".") {
		return nil, errorf(codeUndefinedObject, "unrecognized configuration parameter %q", name)
	}
	value := ""
	if !st.Default {
		v, err := setValueText(st.Values)
		if err != nil {
			return nil, err
		}
		value = v
		if err := validateVar(name, value); err != nil {
			return nil, err
		}
	}
	if st.Scope == sql.ScopeSystem {
		if !systemVars[name] {
			return nil, errorf(codeCantChangeRuntime, "parameter %q cannot be set with ALTER SYSTEM", name)
		}
		return execOnly(func(ctx context.Context) (pgwire.Result, error) {
			if err := s.requireSuperuser("ALTER SYSTEM"); err != nil {
				return nil, err
			}
			_, err := s.c.catalog.Update(ctx, func(cs *catalog.State) error {
				if st.Default {
					delete(cs.System, name)
				} else {
					cs.System[name] = value
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			return command("ALTER SYSTEM"), nil
		}), nil
	}
	return execOnly(func(ctx context.Context) (pgwire.Result, error) {
		if st.Scope != sql.ScopeLocal {
			s.setVar(name, value, st.Default)
			return command("SET", s.paramStatus(name)...), nil
		}
		// SET LOCAL lasts until the transaction ends, committed or not.
		if s.tx == txIdle {
			return command("SET", notice("25P01", "SET LOCAL can only be used in transaction blocks", "")), nil
		}
		if !s.varsLocal {
			s.saveVars().base, s.varsLocal = slices.Clone(s.vars), true
		}
		s.vars.put(name, value, st.Default)
		return command("SET", s.paramStatus(name)...), nil
	}), nil
}

// setVar sets (or, with reset, restores the default of) a session variable.
func (s *Session) setVar(name, value string, reset bool) {
	s.vars.put(name, value, reset)
	if s.varsLocal {
		// A session's SET outlives the transaction's SET LOCALs.
		s.txVars.base.put(name, value, reset)
	}
}

// varList is a session's variables, name and value in the order SET: a
// session sets a few (psql's startup message two), and a slice of them
// costs a fraction of a map's buckets, for each of thousands of idle
// subscribers.
type varList []varPair

type varPair struct{ name, value string }

func (l varList) get(name string) (string, bool) {
	for _, p := range l {
		if p.name == name {
			return p.value, true
		}
	}
	return "", false
}

func (l *varList) set(name, value string) {
	for i := range *l {
		if (*l)[i].name == name {
			(*l)[i].value = value
			return
		}
	}
	*l = append(*l, varPair{name, value})
}

// put sets name to value or, with reset, deletes it.
func (l *varList) put(name, value string, reset bool) {
	if reset {
		l.del(name)
		return
	}
	l.set(name, value)
}

func (l *varList) del(name string) {
	*l = slices.DeleteFunc(*l, func(p varPair) bool { return p.name == name })
	if len(*l) == 0 {
		*l = nil
	}
}

// paramStatus returns the ParameterStatus message for name if it is
// reported to clients.
func (s *Session) paramStatus(name string) [][]byte {
	for _, r := range reportedVars {
		if r == name {
			v, _ := s.getVar(name)
			return [][]byte{pgwire.AppendParameterStatus(nil, displayName(name), v)}
		}
	}
	return nil
}

func (s *Session) planReset(st *sql.ResetVariable) (*plan, error) {
	if st.Scope == sql.ScopeSystem {
		return s.planSet(context.Background(), &sql.SetVariable{Scope: sql.ScopeSystem, Name: st.Name, Default: true})
	}
	return execOnly(func(ctx context.Context) (pgwire.Result, error) {
		if st.All {
			s.vars = nil
			return command("RESET"), nil
		}
		name := strings.ToLower(st.Name)
		if _, ok := varDefaults[name]; !ok {
			return nil, errorf(codeUndefinedObject, "unrecognized configuration parameter %q", name)
		}
		s.setVar(name, "", true)
		return command("RESET", s.paramStatus(name)...), nil
	}), nil
}

func (s *Session) planShowVar(st *sql.ShowVariable) (*plan, error) {
	if st.All {
		cols := []row.Column{{Name: "name", Type: row.TypeText}, {Name: "setting", Type: row.TypeText}, {Name: "description", Type: row.TypeText}}
		return rowsPlan(cols, func() ([]row.Row, error) {
			names := make([]string, 0, len(varDefaults))
			for k := range varDefaults {
				names = append(names, k)
			}
			sort.Strings(names)
			var rows []row.Row
			for _, n := range names {
				v, _ := s.getVar(n)
				rows = append(rows, row.Row{n, v, ""})
			}
			return rows, nil
		}), nil
	}
	name := strings.ToLower(st.Name)
	if _, ok := varDefaults[name]; !ok {
		return nil, errorf(codeUndefinedObject, "unrecognized configuration parameter %q", name)
	}
	return rowsPlan([]row.Column{{Name: name, Type: row.TypeText}}, func() ([]row.Row, error) {
		v, _ := s.getVar(name)
		return []row.Row{{v}}, nil
	}), nil
}
