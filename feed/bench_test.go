package feed_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/klauspost/compress/gzip"

	"github.com/shardtail/shardtail/internal/testsupport/testserver"
)

// BenchmarkStorm is issue 15's storm scaled down to run in-process:
// benchClients clients at once on a benchRows-row table after
// benchChanges changes, over SSE (uncompressed, and SSEGzip asking for
// gzip as browsers do, decoded by the client) and over pgwire (COPY
// (SUBSCRIBE ...)),
// each reading until UP TO so that both end by themselves. Resume
// reconnects from the frontier before the changes (Last-Event-ID; AS OF
// F-1 WITH (SNAPSHOT = false)); Snapshot takes the whole table. It reports
// ns/client; compare SSE with pgwire on one machine (the goal: within
// 1.2x).
func BenchmarkStorm(b *testing.B) {
	const benchClients, benchRows, benchChanges = 64, 1000, 100
	srv := testserver.Start(b, testserver.Options{FeedListen: "127.0.0.1:0"})
	ctx := context.Background()
	admin, err := pgconn.Connect(ctx, srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close(ctx)
	exec := func(sql string) {
		if _, err := admin.Exec(ctx, sql).ReadAll(); err != nil {
			b.Fatalf("%s: %v", sql, err)
		}
	}
	exec("CREATE TABLE t (id int, v text)")
	exec("ALTER TABLE t SET (RETAIN HISTORY FOR '10 minutes')")
	values := ""
	for i := 1; i <= benchRows; i++ {
		if i > 1 {
			values += ", "
		}
		values += fmt.Sprintf("(%d, 'row %d')", i, i)
	}
	exec("INSERT INTO t VALUES " + values)
	frontier := func() uint64 {
		resp, err := http.Get("http://" + srv.FeedAddr + "/v1/subscribe/t?live=false")
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		f, err := strconv.ParseUint(resp.Header.Get("Shardtail-Frontier"), 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		return f
	}
	before := frontier()
	for i := 0; i < benchChanges; i++ {
		exec(fmt.Sprintf("UPDATE t SET v = 'changed %d' WHERE id = %d", i, i%benchRows+1))
	}
	end := frontier()

	// DisableCompression: the request's own Accept-Encoding, decoded here.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchClients, DisableCompression: true}}
	sse := func(query string, headers ...string) func() error {
		return func() error {
			req, _ := http.NewRequest("GET", "http://"+srv.FeedAddr+"/v1/subscribe/t?"+query, nil)
			for i := 0; i+1 < len(headers); i += 2 {
				req.Header.Set(headers[i], headers[i+1])
			}
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			var body io.Reader = resp.Body
			if resp.Header.Get("Content-Encoding") == "gzip" {
				zr, err := gzip.NewReader(resp.Body)
				if err != nil {
					return err
				}
				body = io.MultiReader(zr, resp.Body) // the body to its EOF after the member
			}
			// A client as cheap as pgconn's CopyTo into io.Discard: it
			// looks for the end event without keeping lines (the client
			// runs on the server's cores).
			r := bufio.NewReaderSize(body, 64<<10)
			start := true // at the start of a line
			for {
				line, err := r.ReadSlice('\n')
				if start && bytes.HasPrefix(line, []byte("event: end")) {
					// To EOF, so that the connection is reused.
					_, err := io.Copy(io.Discard, r)
					return err
				}
				switch {
				case err == bufio.ErrBufferFull:
					start = false
				case err != nil:
					return fmt.Errorf("before the end event: %w", err)
				default:
					start = true
				}
			}
		}
	}
	conns := make(chan *pgconn.PgConn, benchClients)
	for i := 0; i < benchClients; i++ {
		c, err := pgconn.Connect(ctx, srv.URL())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close(ctx)
		conns <- c
	}
	pgwire := func(sql string) func() error {
		return func() error {
			c := <-conns
			defer func() { conns <- c }()
			_, err := c.CopyTo(ctx, io.Discard, sql)
			return err
		}
	}
	upTo := strconv.FormatUint(end, 10)
	for _, bc := range []struct {
		name string
		run  func() error
	}{
		{"Resume/SSE", sse("up_to="+upTo, "Last-Event-ID", strconv.FormatUint(before, 10))},
		{"Resume/SSEGzip", sse("up_to="+upTo, "Last-Event-ID", strconv.FormatUint(before, 10), "Accept-Encoding", "gzip")},
		{"Resume/PGWire", pgwire(fmt.Sprintf("COPY (SUBSCRIBE t WITH (SNAPSHOT = false, PROGRESS) AS OF %d UP TO %d) TO STDOUT", before-1, end))},
		{"Snapshot/SSE", sse(fmt.Sprintf("as_of=%d&up_to=%d", end-1, end))},
		{"Snapshot/SSEGzip", sse(fmt.Sprintf("as_of=%d&up_to=%d", end-1, end), "Accept-Encoding", "gzip")},
		{"Snapshot/PGWire", pgwire(fmt.Sprintf("COPY (SUBSCRIBE t WITH (PROGRESS) AS OF %d UP TO %d) TO STDOUT", end-1, end))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var total time.Duration
			for b.Loop() {
				start := time.Now()
				var wg sync.WaitGroup
				errs := make(chan error, benchClients)
				for range benchClients {
					wg.Go(func() { errs <- bc.run() })
				}
				wg.Wait()
				total += time.Since(start)
				close(errs)
				for err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(total.Nanoseconds())/float64(b.N*benchClients), "ns/client")
		})
	}
}
