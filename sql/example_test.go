package sql_test

import (
	"errors"
	"fmt"

	"github.com/shardtail/shardtail/sql"
)

func ExampleParseAll() {
	stmts, err := sql.ParseAll(`BEGIN; DECLARE c CURSOR FOR SUBSCRIBE orders WITH (PROGRESS); FETCH ALL c WITH (timeout='1s')`)
	if err != nil {
		panic(err)
	}
	for _, s := range stmts {
		fmt.Printf("%T: %s\n", s, s)
	}
	sub := stmts[1].(*sql.DeclareCursor).Query.(*sql.Subscribe)
	progress, _ := sql.FindOption(sub.Options, "PROGRESS")
	on, _ := progress.Bool()
	fmt.Println("relation:", sub.Relation.Name, "progress:", on)
	// Output:
	// *sql.Begin: BEGIN
	// *sql.DeclareCursor: DECLARE c CURSOR FOR SUBSCRIBE orders WITH (PROGRESS)
	// *sql.Fetch: FETCH ALL c WITH (TIMEOUT = '1s')
	// relation: orders progress: true
}

func ExampleParse_error() {
	_, err := sql.Parse("SELECT a FROM t WHERE a >")
	var pe *sql.ParseError
	if errors.As(err, &pe) {
		fmt.Println(pe.SQLState(), pe.Message, "at", pe.Position)
	}
	// Output:
	// 42601 syntax error at end of input at 26
}

func ExampleInspect() {
	stmt, _ := sql.Parse("SELECT a, sum(b) FROM t WHERE c > $1 GROUP BY a")
	sql.Inspect(stmt, func(n sql.Node) bool {
		switch n := n.(type) {
		case *sql.ColumnRef:
			fmt.Println("column", n.Column, "at", n.Pos)
		case *sql.Param:
			fmt.Println("parameter", n.Index)
		}
		return true
	})
	// Output:
	// column a at 8
	// column b at 15
	// column c at 31
	// parameter 1
	// column a at 47
}
