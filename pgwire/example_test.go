package pgwire_test

import (
	"context"
	"fmt"
	"iter"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/shardtail/shardtail/pgwire"
)

// echoBackend is the smallest useful Backend: every role is trusted and every
// statement returns itself as a one-row, one-column result.
type echoBackend struct{}

func (echoBackend) Role(ctx context.Context, user string) (pgwire.Role, error) {
	return pgwire.Role{}, nil // no password required
}

func (echoBackend) OpenSession(ctx context.Context, info pgwire.ConnInfo) (pgwire.Session, error) {
	return echoSession{}, nil
}

type echoSession struct{}

func (echoSession) Parameters() map[string]string { return nil } // pgwire's defaults
func (echoSession) TxStatus() pgwire.TxStatus     { return pgwire.TxIdle }
func (echoSession) Sync(context.Context, bool) error {
	return nil
}
func (echoSession) Close() error { return nil }

// Query yields one result per ';'-separated statement, each made only when
// pgwire has sent the previous one.
func (echoSession) Query(ctx context.Context, sql string) iter.Seq2[pgwire.Result, error] {
	return func(yield func(pgwire.Result, error) bool) {
		for _, stmt := range strings.Split(sql, ";") {
			if stmt = strings.TrimSpace(stmt); stmt != "" && !yield(echoResult(stmt), nil) {
				return
			}
		}
	}
}

func (echoSession) Prepare(ctx context.Context, sql string, paramOIDs []uint32) (pgwire.Statement, error) {
	return echoStatement(sql), nil
}

// echoStatement is both the prepared statement and its portal.
type echoStatement string

var echoFields = []pgwire.Field{{Name: "echo", TypeOID: 25, TypeSize: -1, TypeMod: -1}}

func (echoStatement) ParamOIDs() []uint32    { return nil }
func (echoStatement) Fields() []pgwire.Field { return echoFields }
func (echoStatement) Close()                 {}
func (s echoStatement) Bind(ctx context.Context, params [][]byte, paramFormats, resultFormats []int16) (pgwire.Portal, error) {
	return s, nil // text is the same in both formats
}
func (s echoStatement) Execute(ctx context.Context) (pgwire.Result, error) {
	return echoResult(string(s)), nil
}

func echoResult(s string) pgwire.Result {
	return &pgwire.StaticResult{
		Desc:       pgwire.Description{Kind: pgwire.ResultRows, Fields: echoFields},
		Messages:   [][]byte{pgwire.AppendDataRow(nil, [][]byte{[]byte(s)})},
		CommandTag: "SELECT 1",
	}
}

// Example serves echoBackend on a loopback port and queries it with pgx,
// through the extended protocol (pgx's default) and the simple one.
func Example() {
	ctx := context.Background()
	srv, err := pgwire.NewServer(echoBackend{}, pgwire.Config{})
	if err != nil {
		panic(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go srv.Serve(ctx, ln)
	defer srv.Close()

	conn, err := pgx.Connect(ctx, "postgres://me@"+ln.Addr().String()+"/materialize?sslmode=disable")
	if err != nil {
		panic(err)
	}
	defer conn.Close(ctx)
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol} {
		var s string
		if err := conn.QueryRow(ctx, "hello, world", mode).Scan(&s); err != nil {
			panic(err)
		}
		fmt.Println(s)
	}
	fmt.Println(conn.PgConn().ParameterStatus("server_version"))
	// Output:
	// hello, world
	// hello, world
	// 9.5.0
}
