package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardtail/shardtail/internal/testsupport/testbin"
)

func TestDefaultMaxConnections(t *testing.T) {
	for _, tc := range []struct {
		nofile     uint64
		fdsPerConn int
		want       int
	}{
		{1024, 1, 1024 - 256},
		{20000, 1, 20000 - 2000},
		{20000, 2, (20000 - 2000) / 2},
		{1 << 20, 1, 1<<20 - (1<<20)/10},
		{256, 1, 1},
		{100, 1, 1},
		{^uint64(0), 1, 1<<31 - 1}, // RLIM_INFINITY
	} {
		if got, _ := defaultMaxConnections(tc.nofile, tc.fdsPerConn); got != tc.want {
			t.Errorf("defaultMaxConnections(%d, %d) = %d, want %d", tc.nofile, tc.fdsPerConn, got, tc.want)
		}
	}
}

// TestConnectionAdmission runs the binary under a hard file limit of 400,
// with a soft limit of 100 the server must raise, and --max-connections
// derived from it: 400 - 256 = 144. It opens that many connections, among
// them a writer and a live subscriber, then 300 more: as many as would run
// the process out of descriptors if they were let in. Every extra one must
// be refused with FATAL 53300, not hang, while every INSERT succeeds and the
// subscriber sees every row; the server must never log "too many open
// files".
func TestConnectionAdmission(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	const (
		wantMax = 400 - 256
		extra   = 300
	)
	bin := testbin.Build(t)
	srv := startBinaryShell(t, "ulimit -Sn 100 && ulimit -Hn 400 &&", bin, t.TempDir())
	defer srv.kill(t)
	// The log reaches stderr through a pipe, maybe after the ready line.
	announce := fmt.Sprintf("max_connections=%d", wantMax)
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(srv.log(), announce); {
		if time.Now().After(deadline) {
			t.Fatalf("server log does not announce %s:\n%s", announce, srv.log())
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	writer := srv.connect(t)
	defer writer.Close(ctx)
	if _, err := writer.Exec(ctx, "CREATE TABLE t (a int)"); err != nil {
		t.Fatal(err)
	}
	subConn := srv.connect(t)
	defer subConn.Close(ctx)
	rows, err := subConn.Query(ctx, "SUBSCRIBE t", pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan int32, 1024)
	go func() {
		defer close(seen)
		for rows.Next() {
			var ts, diff int64
			var a int32
			if err := rows.Scan(&ts, &diff, &a); err != nil {
				t.Errorf("subscriber: scan: %v", err)
				return
			}
			seen <- a
		}
	}()
	// The reader goroutine must be done with subConn before it is closed:
	// cancelling ctx ends rows.Next.
	defer func() {
		cancel()
		for range seen {
		}
	}()
	for range wantMax - 2 {
		c := srv.connect(t)
		defer c.Close(context.Background())
	}

	// Writes go on while the extra connections are refused.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	inserted := make(chan int32, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		var n int32
		defer func() { inserted <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := writer.Exec(ctx, "INSERT INTO t VALUES ($1)", n+1); err != nil {
				t.Errorf("INSERT %d while connections were refused: %v", n+1, err)
				return
			}
			n++
		}
	}()

	url := "postgres://materialize@" + srv.addr + "/materialize?sslmode=disable&connect_timeout=10"
	var mu sync.Mutex
	var admitted []*pgx.Conn
	refused := 0
	sem := make(chan struct{}, 10)
	var extras sync.WaitGroup
	for range extra {
		sem <- struct{}{}
		extras.Add(1)
		go func() {
			defer extras.Done()
			defer func() { <-sem }()
			c, err := pgx.Connect(ctx, url)
			mu.Lock()
			defer mu.Unlock()
			var pgErr *pgconn.PgError
			switch {
			case err == nil:
				admitted = append(admitted, c) // held, as a real flood would
			case errors.As(err, &pgErr) && pgErr.Severity == "FATAL" && pgErr.Code == "53300" && pgErr.Message == "sorry, too many clients already":
				refused++
			default:
				t.Errorf("extra connection: got %v, want FATAL 53300", err)
			}
		}()
	}
	extras.Wait()
	close(stop)
	wg.Wait()
	for _, c := range admitted {
		c.Close(ctx)
	}
	if refused != extra {
		t.Errorf("%d of %d extra connections refused with 53300; %d admitted", refused, extra, len(admitted))
	}

	n := <-inserted
	if n == 0 {
		t.Fatal("no INSERT completed")
	}
	got := map[int32]bool{}
	for len(got) < int(n) {
		select {
		case a, ok := <-seen:
			if !ok {
				t.Fatalf("subscriber ended after %d of %d rows: %v", len(got), n, rows.Err())
			}
			got[a] = true
		case <-ctx.Done():
			t.Fatalf("subscriber saw %d of %d rows", len(got), n)
		}
	}
	if log := srv.log(); strings.Contains(log, "too many open files") {
		t.Errorf("server ran out of descriptors:\n%s", log)
	}
	t.Logf("%d INSERTs during %d refusals", n, refused)
}
