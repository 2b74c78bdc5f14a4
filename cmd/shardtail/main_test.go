package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/shardtail/shardtail/internal/testsupport/pgtest"
	"github.com/shardtail/shardtail/internal/testsupport/testbin"
)

// TestMain removes the binary that the tests exec'ing it built, and stops
// the throwaway PostgreSQL the sink tests started.
func TestMain(m *testing.M) { pgtest.Main(m, testbin.Remove) }

// TestHelpExitsZero: --help and -h of every subcommand print its usage and
// exit 0; no command and an unknown command exit 1.
func TestHelpExitsZero(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		code  int
		usage string
	}{
		{[]string{"serve", "--help"}, 0, "shardtail serve"},
		{[]string{"storm", "--help"}, 0, "shardtail storm"},
		{[]string{"bench", "--help"}, 0, "shardtail bench"},
		{[]string{"storm", "-h"}, 0, "shardtail storm"},
		{[]string{"sink", "--help"}, 0, "shardtail sink postgres"},
		{[]string{"sink", "postgres", "-h"}, 0, "shardtail sink postgres"},
		// The Redis sink lands one collection; its --collection says so.
		{[]string{"sink", "redis", "-h"}, 0, "collection to land (exactly one)"},
		{[]string{"sink"}, 1, "shardtail sink postgres"},
		{[]string{"sink", "nonsense"}, 1, "shardtail sink postgres"},
		{[]string{"help"}, 0, "Usage:"},
		{[]string{"version"}, 0, "shardtail "},
		{[]string{"--version"}, 0, "shardtail "},
		{nil, 1, "Usage:"},
		{[]string{"nonsense"}, 1, "Usage:"},
		{[]string{"storm", "--no-such-flag"}, 1, "shardtail storm"},
	} {
		var stdout, stderr bytes.Buffer
		err := NewMain(&stdout, &stderr).Run(t.Context(), tc.args)
		if got := exitCode(err, &stderr); got != tc.code {
			t.Errorf("shardtail %s: exit %d (err %v), want %d", strings.Join(tc.args, " "), got, err, tc.code)
		}
		if out := stdout.String() + stderr.String(); !strings.Contains(out, tc.usage) {
			t.Errorf("shardtail %s printed %q, want the usage (%q)", strings.Join(tc.args, " "), out, tc.usage)
		}
	}
}
