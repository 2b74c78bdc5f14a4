package blobkey

import (
	"errors"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	valid := []string{
		"a", "a/b", "s0123/v17/r6f1c0e8a-3b1e-4bde-9a43-5b0f1c2d3e4f",
		"a.b/c..d/e.", "ünïcödé/ключ", strings.Repeat("x", MaxSegmentLen),
	}
	for _, key := range valid {
		if err := Check(key); err != nil {
			t.Errorf("Check(%q) = %v, want nil", key, err)
		}
	}
	invalid := []string{
		"", "/a", "a/", "a//b", "/", "..", "../a", "a/../b", "a/./b", ".", ".tmp-1",
		"a/.x", "a\x00b", "\xff", strings.Repeat("x", MaxSegmentLen+1),
		strings.Repeat("a/", MaxKeyLen/2) + "b",
	}
	for _, key := range invalid {
		if err := Check(key); !errors.Is(err, ErrInvalid) {
			t.Errorf("Check(%q) = %v, want ErrInvalid", key, err)
		}
	}
}

func TestCheckPrefix(t *testing.T) {
	valid := []string{"", "a", "a/", "a/b", "s0123/v1", "a/.", "a/.."}
	for _, p := range valid {
		if err := CheckPrefix(p); err != nil {
			t.Errorf("CheckPrefix(%q) = %v, want nil", p, err)
		}
	}
	invalid := []string{"/", "/a", "a//", "../", "../a", "a/../b", "./", "a\x00", "\xff/"}
	for _, p := range invalid {
		if err := CheckPrefix(p); !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckPrefix(%q) = %v, want ErrInvalid", p, err)
		}
	}
}

func FuzzCheck(f *testing.F) {
	for _, s := range []string{"a/b", "../x", "a//b", ".tmp-1", "a\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if Check(key) != nil {
			return
		}
		// A valid key can never reach outside a directory it is joined to.
		for seg := range strings.SplitSeq(key, "/") {
			if seg == "" || seg == "." || seg == ".." {
				t.Fatalf("Check(%q) accepted segment %q", key, seg)
			}
		}
		if CheckPrefix(key) != nil {
			t.Fatalf("valid key %q is not a valid prefix", key)
		}
	})
}
