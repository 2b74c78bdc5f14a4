package sqlite

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/persist/persisttest"
)

// The environment of a helper process: the file to race on and the
// writer's name. Unset, TestRaceHelperProcess does nothing.
const (
	helperDBEnv     = "SHARDTAIL_SQLITE_RACE_DB"
	helperWriterEnv = "SHARDTAIL_SQLITE_RACE_WRITER"
)

// TestMultiProcessRace races writers in separate processes (this test
// binary, re-executed) and in this one on one file: SQLite's file locks
// and WAL shared memory, not a mutex of ours, must keep the log linear.
func TestMultiProcessRace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "consensus.db")
	c := mustOpenClosed(t, Config{Path: path}) // creates the table first
	const children = 3
	rounds := persisttest.ConsensusRaceRounds

	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		won = make(map[string][]persist.SeqNo)
	)
	for i := range children {
		writer := fmt.Sprintf("process%d", i)
		wg.Go(func() {
			seqs, err := runHelper(t, path, writer)
			if err != nil {
				t.Errorf("%s: %v", writer, err)
			}
			mu.Lock()
			won[writer] = seqs
			mu.Unlock()
		})
	}
	wg.Go(func() {
		seqs, err := persisttest.ConsensusRaceWriter(t.Context(), c, "race", "parent", rounds)
		if err != nil {
			t.Errorf("parent: %v", err)
		}
		mu.Lock()
		won["parent"] = seqs
		mu.Unlock()
	})
	wg.Wait()
	persisttest.ConsensusRaceCheck(t, c, "race", rounds, won)
	t.Logf("wins: parent %d, children %d %d %d", len(won["parent"]), len(won["process0"]), len(won["process1"]), len(won["process2"]))
}

// runHelper runs TestRaceHelperProcess as writer and returns the SeqNos it
// reports winning.
func runHelper(t *testing.T, path, writer string) ([]persist.SeqNo, error) {
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestRaceHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperDBEnv+"="+path, helperWriterEnv+"="+writer)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var seqs []persist.SeqNo
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "won ")
		if !ok {
			continue
		}
		n, perr := strconv.ParseUint(line, 10, 64)
		if perr != nil {
			return seqs, fmt.Errorf("bad helper line %q", sc.Text())
		}
		seqs = append(seqs, persist.SeqNo(n))
	}
	if err != nil {
		return seqs, fmt.Errorf("helper: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.Bytes())
	}
	return seqs, nil
}

// TestRaceHelperProcess is the child of TestMultiProcessRace.
func TestRaceHelperProcess(t *testing.T) {
	path := os.Getenv(helperDBEnv)
	if path == "" {
		return // not a helper process
	}
	c := mustOpenClosed(t, Config{Path: path})
	seqs, err := persisttest.ConsensusRaceWriter(t.Context(), c, "race", os.Getenv(helperWriterEnv), persisttest.ConsensusRaceRounds)
	for _, s := range seqs {
		fmt.Printf("won %d\n", uint64(s))
	}
	if err != nil {
		t.Fatal(err)
	}
}
