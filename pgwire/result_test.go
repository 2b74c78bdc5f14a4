package pgwire

import (
	"slices"
	"testing"
)

// TestCheckResultMessage: an element of a Result's batch is one framed
// message of a type its kind allows, or, for COPY out only, a run of
// CopyData messages back to back; anything else is the producer's bug.
func TestCheckResultMessage(t *testing.T) {
	row := AppendDataRow(nil, [][]byte{[]byte("1")})
	data := AppendCopyData(nil, []byte("1\tx\n"))
	run := slices.Concat(data, AppendCopyData(nil, []byte("2\ty\n")), data)
	for _, tc := range []struct {
		name string
		kind ResultKind
		msg  []byte
		ok   bool
	}{
		{"DataRow", ResultRows, row, true},
		{"CopyData", ResultCopyOut, data, true},
		{"CopyDataRun", ResultCopyOut, run, true},
		{"DataRowRun", ResultRows, slices.Concat(row, row), false},
		{"CopyDataRunInRows", ResultRows, run, false},
		{"DataRowInCopy", ResultCopyOut, row, false},
		{"RunWithDataRow", ResultCopyOut, slices.Concat(data, row), false},
		{"RunCutShort", ResultCopyOut, run[:len(run)-1], false},
		{"RunWithTrailingBytes", ResultCopyOut, append(slices.Clone(run), 'd', 0), false},
		{"Short", ResultCopyOut, data[:4], false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkResultMessage(tc.kind, tc.msg)
			if got := err == nil; got != tc.ok {
				t.Errorf("checkResultMessage = %v, want ok %v", err, tc.ok)
			}
		})
	}
}
