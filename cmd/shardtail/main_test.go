package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/shardtail/shardtail/internal/testsupport/testbin"
)

// TestMain removes the binary that the tests exec'ing it built.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := testbin.Remove(); err != nil {
		fmt.Fprintf(os.Stderr, "testbin: %v\n", err)
	}
	os.Exit(code)
}
