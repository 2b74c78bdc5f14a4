package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardtail/shardtail/catalog"
	"github.com/shardtail/shardtail/internal/childproc"
	"github.com/shardtail/shardtail/internal/testsupport/testbin"
	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/persist/blob"
	"github.com/shardtail/shardtail/persist/consensus"
	"github.com/shardtail/shardtail/stmtlog"
)

// TestCrashRecovery runs the real binary on the embedded default storage
// (file blobs + SQLite), has a client create tables, insert batches (INSERT
// and COPY) and drop tables, and kills the server with SIGKILL at a random
// point. After each restart on the same data dir every acknowledged DDL and
// write must be there and nothing half-applied: the operation in flight at
// the kill is either wholly applied or not at all, SHOW TABLES lists
// exactly the live tables and each of them is readable.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the binary repeatedly")
	}
	bin := testbin.Build(t)
	dataDir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))

	m := &crashModel{tables: map[string]map[int64]bool{}, inFlight: map[string]int{}}
	deadline := time.Now().Add(20 * time.Second)
	iterations, kills := 0, 0
	for iterations < 60 && time.Now().Before(deadline) {
		iterations++
		srv := startBinary(t, bin, dataDir)
		c := srv.connect(t)
		// Recovery: the state on disk is the model's, with the operation
		// in flight at the last kill either applied or not.
		m.verify(t, c, iterations)

		// Write until killed at a random point.
		done := make(chan struct{})
		opRng := rand.New(rand.NewPCG(rng.Uint64(), 2))
		go func() {
			defer close(done)
			for m.step(c, opRng) {
			}
		}()
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		srv.kill(t)
		kills++
		<-done
		c.Close(context.Background())
	}
	// A last restart, checked without a kill in flight.
	srv := startBinary(t, bin, dataDir)
	c := srv.connect(t)
	m.verify(t, c, iterations+1)
	c.Close(context.Background())
	srv.kill(t)
	t.Logf("%d kills; %d acknowledged operations; %d tables live at the end, %d dropped; operations cut by a kill: %v",
		kills, m.acked, len(m.tables), m.dropped, m.inFlight)
	if m.acked < 20 {
		t.Errorf("only %d operations were acknowledged: the test exercised little", m.acked)
	}
}

// crashModel is what the client knows was acknowledged.
type crashModel struct {
	mu sync.Mutex
	// tables maps a live table to the ids of its acknowledged rows.
	tables map[string]map[int64]bool
	// pending is the operation whose outcome the kill made unknown.
	pending        *crashOp
	nextID         int64
	nextTable      int
	acked, dropped int
	// inFlight counts the operations cut by a kill, by kind and outcome.
	inFlight map[string]int
	// log is every operation that took effect, in order: what a run
	// without crashes replays.
	log []crashOp
}

type crashOp struct {
	kind  string // "create", "insert", "drop"
	table string
	ids   []int64
	copy  bool // insert by COPY FROM rather than INSERT
}

// exec runs the operation on c.
func (op crashOp) exec(ctx context.Context, c *pgx.Conn) error {
	var err error
	switch op.kind {
	case "create":
		_, err = c.Exec(ctx, "CREATE TABLE "+op.table+" (id int8 NOT NULL, v text)")
	case "drop":
		_, err = c.Exec(ctx, "DROP TABLE "+op.table)
	case "insert":
		if !op.copy {
			var vals []string
			for _, id := range op.ids {
				vals = append(vals, fmt.Sprintf("(%d, 'row %d')", id, id))
			}
			_, err = c.Exec(ctx, "INSERT INTO "+op.table+" VALUES "+strings.Join(vals, ", "))
		} else {
			var b strings.Builder
			for _, id := range op.ids {
				fmt.Fprintf(&b, "%d\trow %d\n", id, id)
			}
			_, err = c.PgConn().CopyFrom(ctx, strings.NewReader(b.String()), "COPY "+op.table+" FROM STDIN")
		}
	}
	return err
}

// step runs one random operation and reports whether the server answered.
func (m *crashModel) step(c *pgx.Conn, rng *rand.Rand) bool {
	m.mu.Lock()
	live := slices.Sorted(maps.Keys(m.tables))
	var op crashOp
	switch r := rng.IntN(20); {
	case len(live) == 0 || r < 3:
		m.nextTable++
		op = crashOp{kind: "create", table: fmt.Sprintf("t%d", m.nextTable)}
	case r < 5 && len(live) > 1:
		op = crashOp{kind: "drop", table: live[rng.IntN(len(live))]}
	default:
		op = crashOp{kind: "insert", table: live[rng.IntN(len(live))]}
		for range 1 + rng.IntN(200) {
			m.nextID++
			op.ids = append(op.ids, m.nextID)
		}
		op.copy = rng.IntN(2) == 0
	}
	m.pending = &op
	m.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := op.exec(ctx, c)
	if err != nil {
		return false // the kill; pending stays unknown
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.apply(op)
	m.pending = nil
	m.acked++
	return true
}

// apply folds an operation into the model. m.mu must be held.
func (m *crashModel) apply(op crashOp) {
	m.log = append(m.log, op)
	switch op.kind {
	case "create":
		m.tables[op.table] = map[int64]bool{}
	case "drop":
		delete(m.tables, op.table)
		m.dropped++
	case "insert":
		for _, id := range op.ids {
			m.tables[op.table][id] = true
		}
	}
}

// verify compares the server's state with the model, resolving the pending
// operation from what it finds.
func (m *crashModel) verify(t *testing.T, c *pgx.Conn, iteration int) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	ctx := context.Background()
	rows, err := c.Query(ctx, "SHOW TABLES")
	if err != nil {
		t.Fatalf("iteration %d: SHOW TABLES: %v", iteration, err)
	}
	names, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var name, comment string
		err := r.Scan(&name, &comment)
		return name, err
	})
	if err != nil {
		t.Fatalf("iteration %d: SHOW TABLES: %v", iteration, err)
	}
	got := map[string]map[int64]bool{}
	for _, name := range names {
		rows, err := c.Query(ctx, "SELECT id FROM "+name)
		if err != nil {
			t.Fatalf("iteration %d: table %s is listed but cannot be read: %v", iteration, name, err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			t.Fatalf("iteration %d: table %s is listed but cannot be read: %v", iteration, name, err)
		}
		set := map[int64]bool{}
		for _, id := range ids {
			if set[id] {
				t.Fatalf("iteration %d: table %s holds row %d twice", iteration, name, id)
			}
			set[id] = true
		}
		got[name] = set
	}

	applied := func() bool { // does got show the pending operation applied?
		p := m.pending
		switch p.kind {
		case "create":
			_, ok := got[p.table]
			return ok
		case "drop":
			_, ok := got[p.table]
			return !ok
		default:
			n := 0
			for _, id := range p.ids {
				if got[p.table][id] {
					n++
				}
			}
			if n != 0 && n != len(p.ids) {
				t.Fatalf("iteration %d: batch of %d rows into %s half-applied: %d rows present", iteration, len(p.ids), p.table, n)
			}
			return n == len(p.ids)
		}
	}
	if m.pending != nil {
		outcome := " lost"
		if applied() {
			m.apply(*m.pending)
			outcome = " applied"
		}
		m.inFlight[m.pending.kind+outcome]++
		m.pending = nil
	}
	if !maps.EqualFunc(got, m.tables, maps.Equal) {
		for name, want := range m.tables {
			if g, ok := got[name]; !ok {
				t.Errorf("iteration %d: acknowledged table %s (%d rows) is missing", iteration, name, len(want))
			} else if len(g) != len(want) || !maps.Equal(g, want) {
				t.Errorf("iteration %d: table %s has %d rows, want the %d acknowledged", iteration, name, len(g), len(want))
			}
		}
		for name := range got {
			if _, ok := m.tables[name]; !ok {
				t.Errorf("iteration %d: table %s exists but was dropped or never acknowledged", iteration, name)
			}
		}
		t.FailNow()
	}
}

// binaryServer is a `shardtail serve` child process.
type binaryServer struct {
	proc *childproc.Process
	addr string
}

// startBinary starts the server on dataDir with free loopback ports and
// waits until it is ready.
func startBinary(t *testing.T, bin, dataDir string, extra ...string) *binaryServer {
	t.Helper()
	return startBinaryShell(t, "", bin, dataDir, extra...)
}

// startBinaryShell is startBinary run by sh -c after the shell commands
// prelude (e.g. "ulimit -n 400;"), when it is not empty.
func startBinaryShell(t *testing.T, prelude, bin, dataDir string, extra ...string) *binaryServer {
	t.Helper()
	logDir := t.TempDir()
	for attempt := 0; ; attempt++ {
		s := &binaryServer{addr: testbin.FreeAddr(t)}
		args := []string{"serve", "--data-dir", dataDir, "--listen", s.addr, "--http-listen", testbin.FreeAddr(t), "--feed-listen", "", "--tick", "100ms"}
		args = append(args, extra...)
		path := bin
		if prelude != "" {
			// sh execs the server, so the process killed is the server.
			path, args = "sh", append([]string{"-c", prelude + ` exec "$0" "$@"`, bin}, args...)
		}
		proc, err := childproc.Start(path, args, childproc.Options{LogPath: filepath.Join(logDir, fmt.Sprintf("serve-%d.log", attempt))})
		if err != nil {
			t.Fatal(err)
		}
		s.proc = proc
		// Gone before the test's temporary directories are removed (a
		// test's last server is often never stopped otherwise); a no-op
		// when the test killed it already.
		t.Cleanup(proc.Kill)
		err = proc.WaitReady(context.Background(), 30*time.Second, func(context.Context) error {
			if !strings.Contains(proc.Log(), "is ready") {
				return errors.New("no \"is ready\" in its log")
			}
			return nil
		})
		if err == nil {
			return s
		}
		proc.Kill()
		// A port taken between FreeAddr and listen: try others.
		if attempt < 3 && strings.Contains(proc.Log(), "address already in use") {
			continue
		}
		t.Fatalf("server did not start: %v\n%s", err, proc.Log())
	}
}

// log is what the server has written to stdout and stderr.
func (s *binaryServer) log() string { return s.proc.Log() }

func (s *binaryServer) connect(t *testing.T) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, "postgres://materialize@"+s.addr+"/materialize?sslmode=disable")
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, s.log())
	}
	return c
}

// kill sends SIGKILL and waits for the process to go.
func (s *binaryServer) kill(t *testing.T) {
	t.Helper()
	if exited, err := s.proc.Exited(); exited {
		t.Fatalf("server exited before the kill (%v):\n%s", err, s.log())
	}
	s.proc.Kill()
}

var crashCycles = flag.Int("crash-cycles", 12, "TestCrashLeavesNoGarbage: how many times to kill the server during writes")

// TestCrashLeavesNoGarbage kills the server during writes (creates, inserts
// by INSERT and COPY, drops) over and over, then restarts it with a short
// orphan grace and checks that the blobs on disk come back to about what
// the same acknowledged operations leave on a server that never crashed:
// uploads whose commit a kill cut off are swept, restarts do not pile up
// retention readers that stop compaction, and dropped tables' data is
// deleted. Every acknowledged row must still be readable afterwards, so no
// referenced part was deleted.
func TestCrashLeavesNoGarbage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the binary repeatedly")
	}
	bin := testbin.Build(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))

	crashDir := t.TempDir()
	m := &crashModel{tables: map[string]map[int64]bool{}, inFlight: map[string]int{}}
	for i := range *crashCycles {
		srv := startBinary(t, bin, crashDir)
		c := srv.connect(t)
		m.verify(t, c, i+1)
		done := make(chan struct{})
		opRng := rand.New(rand.NewPCG(rng.Uint64(), 2))
		go func() {
			defer close(done)
			for m.step(c, opRng) {
			}
		}()
		time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
		srv.kill(t)
		<-done
		c.Close(context.Background())
	}
	before := countBlobs(t, crashDir)
	crashed := settle(t, bin, crashDir, func(c *pgx.Conn) { m.verify(t, c, *crashCycles+1) })

	// The same acknowledged operations on a server that never crashes.
	cleanDir := t.TempDir()
	srv := startBinary(t, bin, cleanDir)
	c := srv.connect(t)
	for _, op := range m.log {
		if err := op.exec(context.Background(), c); err != nil {
			t.Fatalf("replay %s %s: %v", op.kind, op.table, err)
		}
	}
	c.Close(context.Background())
	srv.kill(t)
	clean := settle(t, bin, cleanDir, nil)

	rows := 0
	for _, ids := range m.tables {
		rows += len(ids)
	}
	t.Logf("%d kills, %d acknowledged operations (%d tables live, %d dropped), %d rows; cut by a kill: %v",
		*crashCycles, m.acked, len(m.tables), m.dropped, rows, m.inFlight)
	t.Logf("blob files: %d after the kills, %d after the sweep, %d without crashes", before.files, crashed.files, clean.files)
	t.Logf("blob bytes: %d after the kills, %d after the sweep, %d without crashes", before.bytes, crashed.bytes, clean.bytes)
	// What the blobs are: parts and rollups of current states, blobs only
	// older live state versions still reference (GC truncates those
	// versions on its own schedule, which the compaction slots and the
	// kills move: 261 to 381 of them in runs that passed and failed the
	// same way), and garbage that no live version references: what a
	// write cut by a kill leaves, which the sweep deletes once it is older
	// than its grace (a kill just before the end may leave one younger).
	crashedUse := logBlobUsage(t, "after the kills", crashDir)
	cleanUse := logBlobUsage(t, "without crashes", cleanDir)
	// Beyond the older versions' blobs, the count returns to the clean
	// run's: a kill may leave a temporary file (removed by the blob store
	// after an hour), a rollup or a compaction's output the clean run does
	// not have, or garbage still within the sweep's grace: about two per
	// kill. Unswept garbage (14,546 files after 30 kills before the sweep
	// existed) is far past that.
	if slack := 2 * *crashCycles; crashedUse.live() > cleanUse.live()+slack {
		t.Errorf("%d blobs after the sweep beyond those only older state versions hold, want at most the %d of a run without crashes + %d",
			crashedUse.live(), cleanUse.live(), slack)
	}
	if m.acked < 20 {
		t.Errorf("only %d operations were acknowledged: the test exercised little", m.acked)
	}
	checkShards(t, crashDir)
}

// checkShards opens a stopped server's data dir and checks every shard:
// a collection's shard has one retention policy reader however often the
// server restarted, and every part its state references exists; any other
// shard (a dropped collection's, or one whose CREATE a kill cut off) holds
// at most one blob, its tombstone or initial rollup.
func checkShards(t *testing.T, dataDir string) {
	t.Helper()
	ctx := context.Background()
	b, err := blob.Open(ctx, "file://"+filepath.Join(dataDir, "blob"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cons, err := consensus.Open(ctx, "sqlite://"+filepath.Join(dataDir, "consensus.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	pc, err := persist.NewClient(b, cons, persist.Config{CompactionMinInputs: -1, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	cat, err := catalog.Open(ctx, cons)
	if err != nil {
		t.Fatal(err)
	}
	blobs := map[string]int{} // shard → blob count
	exists := map[string]bool{}
	if err := b.List(ctx, "", func(m persist.BlobMeta) error {
		shard, _, _ := strings.Cut(m.Key, "/")
		blobs[shard]++
		exists[m.Key] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The statement log's shard belongs to no collection but is live.
	live := map[string]bool{stmtlog.ShardID: true}
	for name, it := range cat.State().Items {
		if it.Shard == "" {
			continue
		}
		live[it.Shard] = true
		st, err := pc.State(ctx, it.Shard)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		critical := 0
		for _, r := range st.Readers {
			if r.LeaseMs == 0 {
				critical++
			}
		}
		if critical != 1 {
			t.Errorf("%s: %d critical (retention policy) readers, want 1", name, critical)
		}
		for _, bt := range st.Batches {
			for _, p := range bt.Parts {
				if !exists[p.Key] {
					t.Errorf("%s: referenced part %s was deleted", name, p.Key)
				}
			}
		}
	}
	for shard, n := range blobs {
		if !live[shard] && n > 1 {
			t.Errorf("shard %s of no collection holds %d blobs, want at most its tombstone", shard, n)
		}
	}
}

// blobStats counts the files (not temporary ones) and bytes under a data
// dir's blob store.
type blobStats struct{ files, temps, bytes int }

func countBlobs(t *testing.T, dataDir string) blobStats {
	t.Helper()
	var st blobStats
	err := filepath.WalkDir(filepath.Join(dataDir, "blob"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == stmtlog.ShardID {
			// The statement log grows with the statements run (more in a
			// run with restarts and checks), not with garbage; its
			// retention has tests of its own.
			return filepath.SkipDir
		}
		if err != nil || d.IsDir() {
			return err
		}
		if strings.HasPrefix(d.Name(), ".tmp-") {
			st.temps++
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st.files++
		st.bytes += int(info.Size())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// settle restarts the server on dataDir with a short orphan grace, waits
// until background maintenance (compaction, GC, the sweep, finalization of
// dropped tables) leaves the blob count unchanged for a while, runs check
// on a connection, and returns the count.
func settle(t *testing.T, bin, dataDir string, check func(c *pgx.Conn)) blobStats {
	t.Helper()
	const grace = 2 * time.Second
	srv := startBinary(t, bin, dataDir, "--orphan-grace", grace.String(), "--sweep-interval", "500ms")
	defer srv.kill(t)
	// Every blob written before the restart is older than the grace from
	// here on, and swept on the first sweep after that.
	time.Sleep(grace)
	last, same := countBlobs(t, dataDir), 0
	for i := 0; same < 4; i++ {
		if i == 240 {
			t.Fatalf("blob count still changing after 2 minutes: %d files", last.files)
		}
		time.Sleep(500 * time.Millisecond)
		n := countBlobs(t, dataDir)
		if n.files == last.files {
			same++
		} else {
			same = 0
		}
		last = n
	}
	if check != nil {
		c := srv.connect(t)
		defer c.Close(context.Background())
		check(c)
	}
	return last
}
