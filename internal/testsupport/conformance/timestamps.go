package conformance

import (
	"fmt"
	"maps"
	"regexp"
	"strconv"
)

// timestamps maps the mz_timestamp values a script observes to placeholders
// <T0>, <T1>, ... in order of first appearance, so that expectations do not
// depend on the wall clock. A value within maxOffset of a placeholder's is
// written relative to it (<T3+1>): the progress row after a write at T is at
// T+1. Placeholders must be ordered as their values are: a new value below
// an existing placeholder's is an error, because an expectation that says
// <T4> would then not mean "later than <T3>".
type timestamps struct {
	names map[uint64]string // value -> "T3" or "T3+1"
	vals  []uint64          // placeholder i's value
	// noOffsets turns off writing values relative to placeholders: with
	// the tick on, a write may land a millisecond after a tick, so "+1"
	// would depend on timing; every new value gets a placeholder of its
	// own instead.
	noOffsets bool
}

// maxOffset is how far from a placeholder a value is still written
// relative to it. Scripts space their writes further apart than this (the
// runner waits a few milliseconds after every exec), so that <T3+1> and
// <T4> cannot be confused.
const maxOffset = 2

func newTimestamps() *timestamps { return &timestamps{names: map[uint64]string{}} }

func (ts *timestamps) clone() *timestamps {
	return &timestamps{names: maps.Clone(ts.names), vals: append([]uint64(nil), ts.vals...), noOffsets: ts.noOffsets}
}

// isTimestamp reports whether a number looks like an epoch-millisecond
// mz_timestamp (13 digits: years 2001 to 2286). Smaller numbers, such as
// AS OF 1, are printed as they are.
func isTimestamp(digits string) bool { return len(digits) == 13 }

// name returns the placeholder for v, assigning a new one if needed.
func (ts *timestamps) name(v uint64) (string, error) {
	if n, ok := ts.names[v]; ok {
		return n, nil
	}
	for d := uint64(1); d <= maxOffset && !ts.noOffsets; d++ {
		for i, pv := range ts.vals {
			switch v {
			case pv + d:
				n := fmt.Sprintf("T%d+%d", i, d)
				ts.names[v] = n
				return n, nil
			case pv - d:
				n := fmt.Sprintf("T%d-%d", i, d)
				ts.names[v] = n
				return n, nil
			}
		}
	}
	return ts.fresh(v)
}

// fresh gives v (not named yet) a placeholder of its own.
func (ts *timestamps) fresh(v uint64) (string, error) {
	for i, pv := range ts.vals {
		if v < pv {
			return "", fmt.Errorf("timestamp %d first seen after the larger <T%d> = %d: placeholders would not follow numeric order", v, i, pv)
		}
	}
	n := fmt.Sprintf("T%d", len(ts.vals))
	ts.vals = append(ts.vals, v)
	ts.names[v] = n
	return n, nil
}

// rowName names the mz_timestamp v of a subscribe row from what the row
// is, so that the name does not depend on how far apart the times the
// server chose are (a load generator's ticks may bunch up under load):
//
//   - a data row's time is an event of its own: it keeps its name if it
//     has one, else it gets a new placeholder, never one relative to a
//     nearby placeholder (two ticks 1 ms apart are <T3> and <T4>, not
//     <T3> and <T3+1>);
//   - a progress row's time is the frontier after the data before it:
//     it is written relative to the placeholder 1 or 2 below it when
//     there is one (<T3+1> after a row at <T3>, even when the next row's
//     <T4> is that same millisecond).
//
// Without offsets (tick scripts) both are name's.
func (ts *timestamps) rowName(v uint64, progress bool) (string, error) {
	if ts.noOffsets {
		return ts.name(v)
	}
	if progress {
		for d := uint64(1); d <= maxOffset; d++ {
			for i, pv := range ts.vals {
				if pv+d == v {
					return fmt.Sprintf("T%d+%d", i, d), nil
				}
			}
		}
		return ts.name(v)
	}
	if n, ok := ts.names[v]; ok {
		return n, nil
	}
	return ts.fresh(v)
}

var digitsRe = regexp.MustCompile(`\d+`)

// replaceKnown writes the timestamps of s that are placeholders already
// (exactly, not by offset) as such, and every other one as <T?>, without
// recording anything: for values that depend on the wall clock, such as a
// since.
func (ts *timestamps) replaceKnown(s string) string {
	return digitsRe.ReplaceAllStringFunc(s, func(d string) string {
		if !isTimestamp(d) {
			return d
		}
		v, err := strconv.ParseUint(d, 10, 64)
		if err != nil {
			return d
		}
		for i, pv := range ts.vals {
			if pv == v {
				return fmt.Sprintf("<T%d>", i)
			}
		}
		return "<T?>"
	})
}

// replace writes every timestamp-looking number in s as its placeholder.
func (ts *timestamps) replace(s string) (string, error) {
	var firstErr error
	out := digitsRe.ReplaceAllStringFunc(s, func(d string) string {
		if !isTimestamp(d) {
			return d
		}
		v, err := strconv.ParseUint(d, 10, 64)
		if err != nil {
			return d
		}
		n, err := ts.name(v)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			return d
		}
		return "<" + n + ">"
	})
	return out, firstErr
}

// placeholderRe matches a placeholder in a script's SQL: <T3>, <T3+1>,
// <T3-10>, or <pid:NAME> (a connection's backend process id).
var placeholderRe = regexp.MustCompile(`<(T(\d+)([+-]\d+)?|pid:(\w+))>`)

// value returns the value of a timestamp placeholder expression such as
// "T3+1", and records the name of that value so that the output shows it
// the same way.
func (ts *timestamps) value(expr string) (uint64, error) {
	m := placeholderRe.FindStringSubmatch("<" + expr + ">")
	if m == nil || m[2] == "" {
		return 0, fmt.Errorf("bad timestamp placeholder <%s>", expr)
	}
	i, _ := strconv.Atoi(m[2])
	if i >= len(ts.vals) {
		return 0, fmt.Errorf("placeholder <T%d> used before it was observed (%d known)", i, len(ts.vals))
	}
	v := ts.vals[i]
	if m[3] != "" {
		d, _ := strconv.ParseInt(m[3], 10, 64)
		v = uint64(int64(v) + d)
		if _, ok := ts.names[v]; !ok {
			ts.names[v] = expr
		}
	}
	return v, nil
}
