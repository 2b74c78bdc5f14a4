package adapter_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shardtail/shardtail/internal/testsupport/testserver"
)

// forPaths runs f once with the fast path on and once with it off
// (enable_subscribe_persist_fast_path), each against a fresh server.
func forPaths(t *testing.T, f func(t *testing.T, s *testserver.Server, flag string)) {
	t.Helper()
	for _, flag := range []string{"on", "off"} {
		t.Run("FastPath"+strings.ToUpper(flag[:1])+flag[1:], func(t *testing.T) {
			f(t, testserver.Start(t, testserver.Options{}), flag)
		})
	}
}

// TestAsOfMaxTimestamp: mz_timestamp is a uint64, so its largest value is
// a valid AS OF. The subscribe waits (the collection never gets there)
// rather than failing or wrapping around to 0, and UP TO below it is the
// bound error, with the numbers printed unsigned.
func TestAsOfMaxTimestamp(t *testing.T) {
	const maxTS = "18446744073709551615"
	forPaths(t, func(t *testing.T, s *testserver.Server, flag string) {
		c := connect(t, s)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		execAll(t, c, "CREATE TABLE t (a int8 NOT NULL, b text)", "INSERT INTO t VALUES (1, 'x')",
			"SET enable_subscribe_persist_fast_path = "+flag)

		execAll(t, c, "BEGIN", "DECLARE c CURSOR FOR SUBSCRIBE t AS OF "+maxTS)
		if got := fetch(t, ctx, c, "FETCH 1 c WITH (timeout = '1s')"); len(got) != 0 {
			t.Errorf("FETCH at AS OF %s: got %q, want no rows", maxTS, got)
		}
		// The same through a numeric and a text cast.
		execAll(t, c, "COMMIT", "BEGIN", "DECLARE c CURSOR FOR SUBSCRIBE t AS OF '"+maxTS+"'::mz_timestamp")
		if got := fetch(t, ctx, c, "FETCH 1 c WITH (timeout = '100ms')"); len(got) != 0 {
			t.Errorf("FETCH at AS OF '%s': got %q, want no rows", maxTS, got)
		}
		// Without a snapshot the listen starts past every time there is.
		execAll(t, c, "COMMIT", "BEGIN", "DECLARE c CURSOR FOR SUBSCRIBE t WITH (SNAPSHOT = false) AS OF "+maxTS)
		execAll(t, connect(t, s), "INSERT INTO t VALUES (2, 'y')")
		if got := fetch(t, ctx, c, "FETCH 1 c WITH (timeout = '300ms')"); len(got) != 0 {
			t.Errorf("FETCH at AS OF %s WITH (SNAPSHOT = false): got %q, want no rows", maxTS, got)
		}
		execAll(t, c, "COMMIT")

		for _, q := range []string{
			"SUBSCRIBE t AS OF " + maxTS + " UP TO 1",
			"SUBSCRIBE t AS OF " + maxTS + ".0 UP TO 18446744073709551614",
		} {
			_, err := fetchErr(ctx, c, q)
			pe := wantCode(t, err, "22000", q)
			if pe == nil {
				continue
			}
			up := strings.Fields(q)[len(strings.Fields(q))-1]
			want := `subscription lower ("as of") bound is beyond its upper ("up to") bound: ` + up + " < " + maxTS
			if pe.Message != want {
				t.Errorf("%s: got message %q, want %q", q, pe.Message, want)
			}
		}
		// AS OF = UP TO = the maximum completes at once with no rows.
		if got, err := fetchErr(ctx, c, "SUBSCRIBE t AS OF "+maxTS+" UP TO "+maxTS); err != nil || len(got) != 0 {
			t.Errorf("AS OF = UP TO = max: got %q, %v; want no rows", got, err)
		}
	})
}
