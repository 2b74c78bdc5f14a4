package main

import (
	"flag"
	"testing"
)

// TestGivenSizeFlag: --part-cache not given leaves the server's default
// (0), given as 0 turns the cache off (-1), and a size is itself, from the
// command line or the environment.
func TestGivenSizeFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		want int64
	}{
		{nil, "", 0},
		{[]string{"--part-cache", "0"}, "", -1},
		{[]string{"--part-cache", "64MiB"}, "", 64 << 20},
		{nil, "1GiB", 1 << 30},
		{nil, "0", -1},
	} {
		if tc.env != "" {
			t.Setenv("SHARDTAIL_PART_CACHE", tc.env)
		}
		var f givenSizeFlag
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.Var(&f, "part-cache", "")
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if err := envDefaults(fs); err != nil {
			t.Fatal(err)
		}
		if got := f.bytes(); got != tc.want {
			t.Errorf("args %q, SHARDTAIL_PART_CACHE=%q: %d, want %d", tc.args, tc.env, got, tc.want)
		}
	}
}
