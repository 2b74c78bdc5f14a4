package adapter

import (
	"runtime"
	"testing"
	"unsafe"
	"weak"

	"github.com/shardtail/shardtail/sql"
)

// TestQueryLetsGoOfTakenStatements: a simple query's steps do not keep
// the syntax tree of a statement they handed out, which a parked
// subscribe's query would otherwise hold for as long as it runs.
func TestQueryLetsGoOfTakenStatements(t *testing.T) {
	stmts, err := sql.ParseAll("COPY (SUBSCRIBE idle WITH (PROGRESS)) TO STDOUT")
	if err != nil {
		t.Fatal(err)
	}
	q := &querySteps{stmts: stmts}
	tree := weak.Make(stmts[0].(*sql.Copy))
	stmts = nil
	func() {
		if st := q.take(); st == nil {
			t.Fatal("take returned no statement")
		}
	}()
	runtime.GC()
	runtime.GC()
	if tree.Value() != nil {
		t.Error("the query's steps still hold the syntax tree of the statement they handed out")
	}
	if q.next != 1 || len(q.stmts) != 1 {
		t.Errorf("after take: next %d of %d statements, want 1 of 1", q.next, len(q.stmts))
	}
	runtime.KeepAlive(q)
}

// TestSessionSize: a session, which each of thousands of idle subscribers
// keeps, fits the 240-byte size class: its flags share one word.
func TestSessionSize(t *testing.T) {
	if got := unsafe.Sizeof(Session{}); got > 240 {
		t.Errorf("Session is %d bytes, want at most 240 (keep its bool fields together)", got)
	}
}
