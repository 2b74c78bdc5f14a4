package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shardtail/shardtail/internal/testsupport/testserver"
)

// stormClients is the storm size of the tests: small, since they assert
// counts and errors, never timing.
const stormClients = 16

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// startLoaded starts an in-process server holding table t of rows rows.
func startLoaded(t *testing.T, rows int) *testserver.Server {
	t.Helper()
	srv := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	must(t, execSQL(ctx, srv.URL(), "CREATE TABLE t (id bigint, payload text)"))
	must(t, copyRows(ctx, srv.URL(), "t", 1, int64(rows), 64))
	return srv
}

func TestStorm(t *testing.T) {
	const rows = 200
	srv := startLoaded(t, rows)
	for _, mode := range []Mode{ModeCopy, ModeFetch, ModeBare} {
		for _, fast := range []string{"on", "off"} {
			t.Run(fmt.Sprintf("%s/fast=%s", mode, fast), func(t *testing.T) {
				r, err := Storm(context.Background(), StormConfig{
					URL: srv.URL(), Clients: stormClients, Mode: mode, Relation: "t", FastPath: fast,
					ExpectRows: rows, Timeout: time.Minute,
				})
				must(t, err)
				if r.Errors != 0 || r.Completed != stormClients || r.Connected != stormClients {
					t.Fatalf("connected %d, completed %d, errors %d %v; want %d, %d, 0",
						r.Connected, r.Completed, r.Errors, r.ErrorSamples, stormClients, stormClients)
				}
				if got, want := r.SnapshotRows, int64(rows*stormClients); got != want {
					t.Errorf("snapshot rows: got %d, want %d", got, want)
				}
				if r.Snapshot.N != stormClients {
					t.Errorf("snapshot samples: got %d, want %d", r.Snapshot.N, stormClients)
				}
			})
		}
	}
}

func TestStormCountsErrors(t *testing.T) {
	srv := startLoaded(t, 10)
	t.Run("WrongRowCount", func(t *testing.T) {
		r, err := Storm(context.Background(), StormConfig{URL: srv.URL(), Clients: 4, Relation: "t", ExpectRows: 11, Timeout: time.Minute})
		must(t, err)
		if r.Completed != 0 || r.Errors != 4 {
			t.Fatalf("completed %d, errors %d; want 0, 4", r.Completed, r.Errors)
		}
	})
	t.Run("UnknownRelation", func(t *testing.T) {
		r, err := Storm(context.Background(), StormConfig{URL: srv.URL(), Clients: 4, Relation: "nope", Timeout: time.Minute})
		must(t, err)
		if r.Completed != 0 || r.Errors != 4 {
			t.Fatalf("completed %d, errors %d; want 0, 4", r.Completed, r.Errors)
		}
		for msg := range r.ErrorSamples {
			if !strings.Contains(msg, "42P01") {
				t.Errorf("error %q; want SQLSTATE 42P01", msg)
			}
		}
	})
}

// TestStormLive has a writer insert rows while every client stays
// subscribed; the reading clients must each get every row, the stalled
// ones are not counted.
func TestStormLive(t *testing.T) {
	for _, fast := range []string{"on", "off"} {
		t.Run("fast="+fast, func(t *testing.T) {
			srv := startLoaded(t, 5)
			const written, stalled = 20, 2
			r, err := Storm(context.Background(), StormConfig{
				URL: srv.URL(), Clients: stormClients, Relation: "t", FastPath: fast, Timeout: time.Minute,
				LatencyColumn: 4, Stalled: stalled,
				Live: func(ctx context.Context) error {
					for i := range written {
						now := time.Now().UnixNano()
						if err := execSQL(ctx, srv.URL(), fmt.Sprintf("INSERT INTO t VALUES (%d, '%d-x')", 100+i, now)); err != nil {
							return err
						}
					}
					// Wait for every reading client to have every row.
					deadline := time.Now().Add(30 * time.Second)
					for time.Now().Before(deadline) {
						time.Sleep(50 * time.Millisecond)
						if srvRows(ctx, srv.URL()) >= 5+written {
							break
						}
					}
					time.Sleep(time.Second)
					return nil
				},
			})
			must(t, err)
			if r.Errors != 0 || r.Completed != stormClients {
				t.Fatalf("completed %d, errors %d %v", r.Completed, r.Errors, r.ErrorSamples)
			}
			if got, want := r.LiveRows, int64(written*(stormClients-stalled)); got != want {
				t.Errorf("live rows: got %d, want %d", got, want)
			}
			if got, want := r.Latency.N, written*(stormClients-stalled); got != want {
				t.Errorf("latency samples: got %d, want %d", got, want)
			}
		})
	}
}

// srvRows is the snapshot size of t now.
func srvRows(ctx context.Context, url string) int64 {
	r, err := Storm(ctx, StormConfig{URL: url, Clients: 1, Relation: "t", Timeout: time.Minute, Settle: -1})
	if err != nil || r.Completed != 1 {
		return -1
	}
	return r.SnapshotRows
}

func TestParse(t *testing.T) {
	if v, ok := parseUint([]byte("1795966136067")); !ok || v != 1795966136067 {
		t.Errorf("parseUint: got %d, %v", v, ok)
	}
	for _, bad := range []string{"", "12a", "-1", "99999999999999999999"} {
		if _, ok := parseUint([]byte(bad)); ok {
			t.Errorf("parseUint(%q) ok; want not ok", bad)
		}
	}
	f, rest := cutTab([]byte("17\tt\t\\N"))
	if string(f) != "17" || string(rest) != "t\t\\N" {
		t.Errorf("cutTab: got %q, %q", f, rest)
	}
	if got := commas(2048); got != "2,048" {
		t.Errorf("commas: got %q", got)
	}
	if got := string(payload(nil, 7, 64)); len(got) != 64 || got != string(payload(nil, 7, 64)) {
		t.Errorf("payload: got %q", got)
	}
}

func TestIsStalled(t *testing.T) {
	for _, tc := range []struct{ total, n int }{{16, 2}, {256, 26}, {10, 0}, {5, 5}} {
		got := 0
		for i := range tc.total {
			if isStalled(i, tc.total, tc.n) {
				got++
			}
		}
		if got != tc.n {
			t.Errorf("isStalled(%d of %d): %d stalled", tc.n, tc.total, got)
		}
	}
}

// TestStormStalledResume: stalled clients on a small budget are detached
// while a writer runs, then read again and each receives every row, once.
func TestStormStalledResume(t *testing.T) {
	srv := startLoaded(t, 5)
	// 8 MiB: more than the kernel buffers for a connection whose client
	// does not read (the send buffer autotunes up to tcp_wmem's maximum,
	// 4 MiB on Debian, plus the receive window). With 3 MiB the kernel
	// could take it all, and no stalled client was ever detached.
	const inserts, perInsert, stalled, payload = 160, 5, 2, 10 << 10
	const written = inserts * perInsert
	pad := strings.Repeat("x", payload)
	r, err := Storm(context.Background(), StormConfig{
		URL: srv.URL(), Clients: 6, Relation: "t", FastPath: "on", Timeout: 20 * time.Second,
		Stalled: stalled, StalledSQL: []string{"SET subscribe_max_buffered_bytes = 65536"},
		IDColumn: 3, ResumeStalled: func() int64 { return written },
		Live: func(ctx context.Context) error {
			for i := range inserts {
				values := make([]string, perInsert)
				for j := range values {
					values[j] = fmt.Sprintf("(%d, '%s')", 1000+i*perInsert+j, pad)
				}
				if err := execSQL(ctx, srv.URL(), "INSERT INTO t VALUES "+strings.Join(values, ", ")); err != nil {
					return err
				}
			}
			return nil
		},
	})
	must(t, err)
	if r.Errors != 0 || r.Completed != 6 {
		t.Fatalf("completed %d, errors %d %v", r.Completed, r.Errors, r.ErrorSamples)
	}
	if r.StalledComplete != stalled || len(r.StalledFailures) != 0 {
		t.Logf("detaches %v, resumes %v, catch-ups %v, history loss %v", counterValue(t, srv, "shardtail_tail_detaches_total"),
			counterValue(t, srv, "shardtail_tail_resumes_total"), counterValue(t, srv, "shardtail_tail_private_catchups_total"),
			counterValue(t, srv, "shardtail_tail_history_loss_errors_total"))
		t.Fatalf("%d of %d stalled clients received every row on reading again (failures %v)", r.StalledComplete, stalled, r.StalledFailures)
	}
	detaches, resumes := counterValue(t, srv, "shardtail_tail_detaches_total"), counterValue(t, srv, "shardtail_tail_resumes_total")
	if detaches < stalled || resumes < stalled {
		t.Errorf("detaches %v, resumes %v: want each stalled client detached and resumed (at least %d)", detaches, resumes, stalled)
	}
}

// counterValue reads a counter from the in-process server's registry.
func counterValue(t *testing.T, srv *testserver.Server, name string) float64 {
	t.Helper()
	mfs, err := srv.Registry.Gather()
	must(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			var v float64
			for _, m := range mf.GetMetric() {
				v += m.GetCounter().GetValue()
			}
			return v
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}

// TestStormLiveWant: with LiveWant the storm waits for every reading client
// to have every live row (Live here returns as soon as it wrote), and
// counts the rows a client never got as missing, the client as an error.
func TestStormLiveWant(t *testing.T) {
	const written = 10
	for _, tc := range []struct {
		name  string
		extra int64 // rows wanted that were never written
	}{{"EveryRow", 0}, {"Missing", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startLoaded(t, 5)
			r, err := Storm(context.Background(), StormConfig{
				URL: srv.URL(), Clients: stormClients, Relation: "t", Timeout: 5 * time.Second,
				Live: func(ctx context.Context) error {
					for i := range written {
						if err := execSQL(ctx, srv.URL(), fmt.Sprintf("INSERT INTO t VALUES (%d, 'x')", 100+i)); err != nil {
							return err
						}
					}
					return nil
				},
				LiveWant: func() int64 { return written + tc.extra },
			})
			must(t, err)
			if got, want := r.LiveRows, int64(written*stormClients); got != want {
				t.Errorf("live rows: got %d, want %d", got, want)
			}
			if got, want := r.LiveMissing, tc.extra*stormClients; got != want {
				t.Errorf("missing: got %d, want %d", got, want)
			}
			wantErrs := 0
			if tc.extra > 0 {
				wantErrs = stormClients
			}
			if r.Errors != wantErrs || r.Completed != stormClients {
				t.Errorf("completed %d, errors %d %v; want %d, %d", r.Completed, r.Errors, r.ErrorSamples, stormClients, wantErrs)
			}
		})
	}
}
