package main

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeFences: every line of the README that begins with ``` is a
// code fence, and they pair up. A line like "``` `x` lists ..." is not a
// fence in CommonMark (a backtick fence's info string holds no backtick),
// so the block it meant to close ran on through the sections after it.
func TestReadmeFences(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	open := 0
	for i, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "```") {
			continue
		}
		info := strings.TrimLeft(line, "`")
		if strings.Contains(info, "`") || (open != 0 && strings.TrimSpace(info) != "") {
			t.Errorf("README.md:%d: %q is not a code fence: a fence is alone on its line (an opening one with a language)", i+1, line)
			continue
		}
		if open == 0 {
			open = i + 1
		} else {
			open = 0
		}
	}
	if open != 0 {
		t.Errorf("README.md:%d: code block never closed", open)
	}
}
