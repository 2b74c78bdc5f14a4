package validate

import (
	"errors"
	"testing"

	"github.com/shardtail/shardtail/persist"
)

func TestCompareAndSet(t *testing.T) {
	seq := func(s persist.SeqNo) *persist.SeqNo { return &s }
	tests := []struct {
		name     string
		expected *persist.SeqNo
		new      persist.SeqNo
		ok       bool
	}{
		{"FirstAnySeqNo", nil, 1, true},
		{"FirstZero", nil, 0, true},
		{"FirstMax", nil, MaxSeqNo, true},
		{"FirstBeyondMax", nil, MaxSeqNo + 1, false},
		{"Next", seq(3), 4, true},
		{"Gap", seq(3), 9, true},
		{"Equal", seq(3), 3, false},
		{"Lower", seq(3), 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CompareAndSet(tt.expected, persist.VersionedData{SeqNo: tt.new})
			if tt.ok && err != nil {
				t.Fatalf("got %v, want nil", err)
			}
			if !tt.ok && !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("got %v, want ErrInvalidArgument", err)
			}
		})
	}
}

func TestLimit(t *testing.T) {
	for _, limit := range []int{0, 1, 1 << 40} {
		if err := Limit(limit); err != nil {
			t.Errorf("Limit(%d) = %v, want nil", limit, err)
		}
	}
	if err := Limit(-1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Limit(-1) = %v, want ErrInvalidArgument", err)
	}
}
