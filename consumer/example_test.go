package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardtail/shardtail/adapter"
	"github.com/shardtail/shardtail/consumer"
	blobmem "github.com/shardtail/shardtail/persist/blob/mem"
	consmem "github.com/shardtail/shardtail/persist/consensus/mem"
	"github.com/shardtail/shardtail/server"
)

// exampleURL is a server with a table greetings(id, msg) holding two rows,
// for the examples, which cannot start one themselves.
var exampleURL string

func TestMain(m *testing.M) {
	os.Exit(func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		srv, err := server.New(ctx, server.Config{
			Blob: blobmem.New(), Consensus: consmem.New(),
			Adapter: adapter.Config{Tick: 20 * time.Millisecond, FastPath: true, Version: "test"},
			Listen:  "127.0.0.1:0",
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "example server:", err)
			return 1
		}
		defer srv.Close()
		exampleURL = fmt.Sprintf("postgres://materialize@%s/materialize?sslmode=disable", srv.Addr())
		conn, err := pgx.Connect(ctx, exampleURL)
		if err != nil {
			fmt.Fprintln(os.Stderr, "example server:", err)
			return 1
		}
		for _, q := range []string{"CREATE TABLE greetings (id int, msg text)", "INSERT INTO greetings VALUES (1, 'hello'), (2, 'world')"} {
			if _, err := conn.Exec(ctx, q); err != nil {
				fmt.Fprintln(os.Stderr, "example server:", err)
				return 1
			}
		}
		conn.Close(ctx)
		return m.Run()
	}())
}

// A custom sink is a function of a closed batch. This one prints the
// snapshot and stops; a real one writes to its target, and Run commits the
// batch's frontier through the Checkpoint after each Write.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sink := consumer.SinkFunc(func(ctx context.Context, b consumer.Batch) error {
		for _, u := range b.Updates {
			fmt.Println(u.Diff, u.Values)
		}
		if b.Snapshot && !b.Partial {
			cancel() // Run drains: this batch is committed, then it returns
		}
		return nil
	})
	cp := &consumer.MemoryCheckpoint{} // or consumer.FileCheckpoint{Path: …}
	err := consumer.Run(ctx, consumer.Config{
		URL:        exampleURL,
		Sources:    []consumer.Source{{Name: "greetings"}},
		Checkpoint: cp,
	}, sink)
	pos, _ := cp.Load(ctx)
	fmt.Println(errors.Is(err, context.Canceled), pos.Frontier > 0)
	// Output:
	// 1 [1 hello]
	// 1 [2 world]
	// true true
}
