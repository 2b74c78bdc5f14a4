package row

import "testing"

func TestColumnTypmod(t *testing.T) {
	tests := []struct {
		col    Column
		typmod int32
		name   string
	}{
		{Column{Type: TypeText}, -1, "text"},
		{Column{Type: TypeText, Mod: TypeMod{Set: true, Length: 3}}, 7, "character varying(3)"},
		{Column{Type: TypeNumeric}, -1, "numeric"},
		{Column{Type: TypeNumeric, Mod: TypeMod{Set: true, Precision: 5, Scale: 2}}, 327686, "numeric(5,2)"},
		{Column{Type: TypeNumeric, Mod: TypeMod{Set: true, Precision: 3, Scale: -2}}, 0x3_07fe + 4, "numeric(3,-2)"},
		{Column{Type: TypeTimestamp, Mod: TypeMod{Set: true}}, 0, "timestamp(0) without time zone"},
		{Column{Type: TypeTimestampTZ, Mod: TypeMod{Set: true, Precision: 3}}, 3, "timestamp(3) with time zone"},
		{Column{Type: TypeInt4, Mod: TypeMod{Set: true, Length: 3}}, -1, "integer"},
	}
	for _, tt := range tests {
		if got := tt.col.Typmod(); got != tt.typmod {
			t.Errorf("%+v: Typmod = %d, want %d", tt.col, got, tt.typmod)
		}
		if got := tt.col.TypeName(); got != tt.name {
			t.Errorf("%+v: TypeName = %q, want %q", tt.col, got, tt.name)
		}
	}
	bad := Schema{Columns: []Column{{Name: "a", Type: TypeInt4, Mod: TypeMod{Set: true, Length: 3}}}}
	if err := bad.Validate(); err == nil {
		t.Errorf("Validate accepted a modifier on an integer column")
	}
}
