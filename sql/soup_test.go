package sql

import (
	"flag"
	"math/rand/v2"
	"strings"
	"testing"
)

// soupVocabulary is the material TestRoundTripSoup builds statements from:
// keywords, tricky names, literals and punctuation.
var soupVocabulary = strings.Fields(`
	SELECT FROM WHERE AS OF AT LEAST UP TO WITH WITHIN TIMESTAMP ORDER BY GROUP HAVING LIMIT OFFSET ALL
	DISTINCT JOIN LEFT RIGHT FULL CROSS INNER OUTER ON USING AND OR NOT IS NULL TRUE FALSE UNKNOWN
	IN LIKE ILIKE BETWEEN CASE WHEN THEN ELSE END CAST EXISTS INTERVAL DOUBLE PRECISION TIME ZONE
	WITHOUT VARYING CHARACTER DESC ASC NULLS FIRST LAST ENVELOPE UPSERT DEBEZIUM KEY SNAPSHOT PROGRESS
	SUBSCRIBE DECLARE CURSOR FETCH FORWARD NEXT CLOSE COPY STDIN STDOUT CSV HEADER FORMAT BINARY
	SET RESET SHOW SESSION LOCAL TABLES VIEWS SOURCES COLUMNS MATERIALIZED VIEW TABLE SOURCE
	CREATE DROP ALTER SYSTEM RETAIN HISTORY FOR IF EXISTS CASCADE INSERT INTO VALUES UPDATE DELETE
	DEFAULT TRANSACTION ISOLATION LEVEL READ ONLY BEGIN COMMIT ROLLBACK GRANT REVOKE ROLE LOGIN PASSWORD
	LOAD GENERATOR COUNTER TICK VALUE SIZE DISCARD DEALLOCATE PREPARE TIMEOUT NAMES
	a b t x "of" "Foo" "select" "a b" "exists" "time" "session" "" left current_timestamp current_schema
	exists row "row" "double precision" timestamp interval day int text[] mz_diff e n
	1 0 1.5 .5 1e3 $1 $2 'x' 'it''s' E'\n' $$d$$ '' 'true' -1
	( ) ( ) , , ; . . * = <> < >= + - - / % ^ || :: -> [ ]
`)

var (
	soupN    = flag.Int("soup", 30000, "number of random statements TestRoundTripSoup tries")
	soupSeed = flag.Uint64("soupseed", 1, "random seed of TestRoundTripSoup")
)

// TestRoundTripSoup parses random token sequences and checks, for the ones
// that parse, the same property as FuzzParse. It reaches statement shapes that
// byte-level fuzzing finds slowly.
func TestRoundTripSoup(t *testing.T) {
	n := *soupN
	if testing.Short() {
		n = 3000
	}
	rng := rand.New(rand.NewPCG(*soupSeed, 2))
	starts := []string{"SELECT", "SUBSCRIBE", "SUBSCRIBE t", "COPY", "CREATE", "SET", "SHOW", "FETCH",
		"DECLARE c CURSOR FOR", "INSERT INTO t", "ALTER", "DROP", "SELECT a FROM t", "SELECT * FROM"}
	parsed := 0
	for i := 0; i < n; i++ {
		words := []string{starts[rng.IntN(len(starts))]}
		for k := rng.IntN(12); k >= 0; k-- {
			words = append(words, soupVocabulary[rng.IntN(len(soupVocabulary))])
		}
		sql := strings.Join(words, " ")
		stmts, err := ParseAll(sql)
		if err != nil {
			if _, ok := err.(*ParseError); !ok {
				t.Fatalf("ParseAll(%q): %T %v", sql, err, err)
			}
			continue
		}
		parsed++
		for _, s := range stmts {
			text := s.String()
			again, err := Parse(text)
			if err != nil {
				t.Fatalf("input %q\nrenders as %q\nwhich fails to parse: %s", sql, text, describe(err))
			}
			if again.String() != text || !equalIgnoringPos(s, again) {
				t.Fatalf("input %q\nrenders as %q\nwhich parses differently: %q", sql, text, again.String())
			}
		}
	}
	t.Logf("%d of %d random statements parsed", parsed, n)
}
