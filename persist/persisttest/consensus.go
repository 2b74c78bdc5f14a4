package persisttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shardtail/shardtail/persist"
)

const (
	// ConsensusLargeDataSize is the size of the largest value TestConsensus
	// stores: a generous bound on one state diff or a small rollup.
	ConsensusLargeDataSize = 1 << 20

	// ConsensusRaceWriters and ConsensusRaceRounds size TestConsensus's race:
	// that many goroutines CAS one key until it reaches that many versions.
	ConsensusRaceWriters = 8
	ConsensusRaceRounds  = 200

	// consScanAll is the Scan limit that means "every version".
	consScanAll = math.MaxInt

	// consMaxSeqNo is the largest SeqNo the contract lets a backend store.
	consMaxSeqNo = persist.SeqNo(math.MaxInt64)

	// consWatchBurst is how many CASes the Watch test commits while a
	// watcher reads nothing: more than any sane channel buffer, so that a
	// backend whose ring blocks on a full channel hangs the test.
	consWatchBurst = 300

	// consWait bounds every wait for a doorbell in the Watch test.
	consWait = 10 * time.Second
)

// consensusWatcher is the optional doorbell of a Consensus backend (the
// persist.Watcher shape): keys of committed CASes arrive on the channel,
// which is closed when ctx is done.
type consensusWatcher interface {
	Watch(ctx context.Context) (<-chan string, error)
}

// TestConsensus is the acceptance suite for persist.Consensus: it pins the
// contract written on the interface. Every implementation runs it, the real
// servers included. If the Consensus also has a Watch method (the
// persist.Watcher shape), the suite tests that too.
//
// newConsensus returns a new, empty Consensus on each call (one per
// subtest, so that subtests never see each other's keys); the suite closes
// it and fails if Close fails.
func TestConsensus(t *testing.T, newConsensus func(t *testing.T) persist.Consensus) {
	t.Run("HeadEmpty", func(t *testing.T) {
		c := consOpen(t, newConsensus)
		if got := consHead(t, c, "missing"); got != nil {
			t.Fatalf("Head(missing) = %s, want nil", consFormat(*got))
		}
	})

	t.Run("CompareAndSetEmptyKey", func(t *testing.T) {
		c := consOpen(t, newConsensus)
		if consCAS(t, c, "k", consSeq(0), 1) {
			t.Error("CAS(expected v0) on an empty key committed; want mismatch")
		}
		if consCAS(t, c, "k", consSeq(5), 6) {
			t.Error("CAS(expected v5) on an empty key committed; want mismatch")
		}
		if got := consHead(t, c, "k"); got != nil {
			t.Fatalf("Head after mismatches = %s, want nil", consFormat(*got))
		}
		if !consCAS(t, c, "k", nil, 1) {
			t.Fatal("CAS(expected nil) on an empty key: mismatch; want committed")
		}
		consWantHead(t, c, "k", 1)
	})

	t.Run("CompareAndSetWrongExpected", func(t *testing.T) {
		c := consOpen(t, newConsensus)
		consWrite(t, c, "k", 3)
		for _, expected := range []*persist.SeqNo{nil, consSeq(0), consSeq(2), consSeq(4), consSeq(100)} {
			if consCAS(t, c, "k", expected, 101) {
				t.Errorf("CAS(expected %s) with head v3 committed; want mismatch", consFormatSeq(expected))
			}
		}
		consWantHead(t, c, "k", 3)
		if !consCAS(t, c, "k", consSeq(3), 4) {
			t.Fatal("CAS(expected v3) with head v3: mismatch; want committed")
		}
		consWantLog(t, c, "k", 1, 4)
	})

	t.Run("CompareAndSetNotAdvancing", func(t *testing.T) {
		c := consOpen(t, newConsensus)
		consWrite(t, c, "k", 3)
		for _, seq := range []persist.SeqNo{3, 2, 0} {
			ok, err := c.CompareAndSet(t.Context(), "k", consSeq(3), persist.VersionedData{SeqNo: seq, Data: []byte("not advancing")})
			if ok {
				t.Errorf("CAS(expected v3, new %s) committed; want not committed", seq)
			}
			consWantDeterminate(t, err, fmt.Sprintf("CAS(expected v3, new %s)", seq))
		}
		consWantLog(t, c, "k", 1, 3)
	})

	t.Run("CompareAndSetSeqNoRange", func(t *testing.T) {
		c := consOpen(t, newConsensus)
		ok, err := c.CompareAndSet(t.Context(), "k", nil, persist.VersionedData{SeqNo: consMaxSeqNo + 1})
		if ok || err == nil {
			t.Errorf("CAS(new v%d) = %v, %v; want an error", uint64(consMaxSeqNo)+1, ok, err)
		}
		consWantDeterminate(t, err, "CAS beyond the SeqNo range")
		if got := consHead(t, c, "k"); got != nil {
			t.Fatalf("Head after a rejected CAS = %s, want nil", consFormat(*got))
		}
		if !consCAS(t, c, "k", nil, consMaxSeqNo) {
			t.Fatalf("CAS(expected nil, new %s): mismatch; want committed", consMaxSeqNo)
		}
		consWantHead(t, c, "k", consMaxSeqNo)
		got, err := c.Scan(t.Context(), "k", consMaxSeqNo, consScanAll)
		if err != nil || len(got) != 1 || got[0].SeqNo != consMaxSeqNo {
			t.Fatalf("Scan(from %s) = %v, %v; want the one version", consMaxSeqNo, consFormatAll(got), err)
		}
	})

	t.Run("Scan", func(t *testing.T) {
		c := consOpen(t, newConsensus)
		consWrite(t, c, "k", 5)
		tests := []struct {
			from        persist.SeqNo
			limit       int
			first, last persist.SeqNo // empty when first > last
		}{
			{0, consScanAll, 1, 5},
			{1, 5, 1, 5},
			{1, 6, 1, 5},
			{3, 2, 3, 4},
			{5, 10, 5, 5},
			{1, 1, 1, 1},
			{6, 10, 1, 0},
			{math.MaxUint64, 10, 1, 0},
			{0, 0, 1, 0},
		}
		for _, tt := range tests {
			got, err := c.Scan(t.Context(), "k", tt.from, tt.limit)
			if err != nil {
				t.Errorf("Scan(from %s, limit %d): %v", tt.from, tt.limit, err)
				continue
			}
			consCompareLog(t, fmt.Sprintf("Scan(from %s, limit %d)", tt.from, tt.limit), got, "k", tt.first, tt.last)
		}
		got, err := c.Scan(t.Context(), "missing", 0, consScanAll)
		if err != nil || len(got) != 0 {
			t.Errorf("Scan(missing) = %s, %v; want empty", consFormatAll(got), err)
		}
	})

	t.Run("Truncate", func(t *testing.T) {
		c := consOpen(t, newConsensus)
		consWrite(t, c, "k", 5)
		steps := []struct {
			seqno   persist.SeqNo
			deleted int
			first   persist.SeqNo // the log is then [first, 5]
		}{
			{0, 0, 1},
			{1, 0, 1},
			{3, 2, 3},
			{3, 0, 3},
			{2, 0, 3},
			{5, 2, 5}, // the head survives
			{5, 0, 5},
		}
		for _, s := range steps {
			n, err := c.Truncate(t.Context(), "k", s.seqno)
			if err != nil || n != s.deleted {
				t.Fatalf("Truncate(%s) = %d, %v; want %d, nil", s.seqno, n, err, s.deleted)
			}
			consWantLog(t, c, "k", s.first, 5)
		}
		for _, seqno := range []persist.SeqNo{6, consMaxSeqNo, math.MaxUint64} {
			n, err := c.Truncate(t.Context(), "k", seqno)
			if !errors.Is(err, persist.ErrTruncateBeyondHead) {
				t.Errorf("Truncate(%s) with head v5 = %d, %v; want ErrTruncateBeyondHead", seqno, n, err)
			}
			consWantDeterminate(t, err, fmt.Sprintf("Truncate(%s)", seqno))
		}
		consWantLog(t, c, "k", 5, 5)
		if !consCAS(t, c, "k", consSeq(5), 6) {
			t.Fatal("CAS(expected v5) after truncating to v5: mismatch; want committed")
		}
		consWantLog(t, c, "k", 5, 6)
	})

	t.Run("TruncateEmptyKey", func(t *testing.T) {
		c := consOpen(t, newConsensus)
		for _, seqno := range []persist.SeqNo{0, 1} {
			n, err := c.Truncate(t.Context(), "missing", seqno)
			if !errors.Is(err, persist.ErrTruncateBeyondHead) {
				t.Errorf("Truncate(missing, %s) = %d, %v; want ErrTruncateBeyondHead", seqno, n, err)
			}
		}
	})

	t.Run("ListKeys", func(t *testing.T) {
		c := consOpen(t, newConsensus)
		consWantKeys(t, c)
		keys := []string{"a", "b", "c/d", "shard-ü"}
		for i, k := range keys {
			consWrite(t, c, k, persist.SeqNo(i+1))
		}
		consWantKeys(t, c, keys...)
		if _, err := c.Truncate(t.Context(), "b", 2); err != nil {
			t.Fatalf("Truncate(b, v2): %v", err)
		}
		consWantKeys(t, c, keys...) // a truncated key keeps its head
	})

	t.Run("KeysIndependent", func(t *testing.T) {
		c := consOpen(t, newConsensus)
		// Keys that are prefixes of each other, differ in case or only in
		// non-ASCII bytes.
		keys := []string{"k", "k2", "K", "k/", "k/k", "ü", "u"}
		for i, k := range keys {
			consWrite(t, c, k, persist.SeqNo(i+1))
		}
		for i, k := range keys {
			consWantLog(t, c, k, 1, persist.SeqNo(i+1))
		}
		if consCAS(t, c, "k", consSeq(2), 3) {
			t.Error("CAS(k, expected v2) committed though k's head is v1 (k2's is v2)")
		}
		if _, err := c.Truncate(t.Context(), "k/k", 5); err != nil {
			t.Fatalf("Truncate(k/k, v5): %v", err)
		}
		consWantLog(t, c, "k/k", 5, 5)
		for i, k := range keys {
			if k != "k/k" {
				consWantLog(t, c, k, 1, persist.SeqNo(i+1))
			}
		}
	})

	t.Run("LargeData", func(t *testing.T) {
		c := consOpen(t, newConsensus)
		v1 := persist.VersionedData{SeqNo: 1, Data: consRandom(ConsensusLargeDataSize, 1)}
		v2 := persist.VersionedData{SeqNo: 2, Data: consRandom(ConsensusLargeDataSize, 2)}
		consMustCAS(t, c, "k", nil, v1)
		consMustCAS(t, c, "k", consSeq(1), v2)
		head := consHead(t, c, "k")
		if head == nil || head.SeqNo != 2 || !bytes.Equal(head.Data, v2.Data) {
			t.Errorf("Head = %v; want v2 with its %d bytes", consFormatPtr(head), len(v2.Data))
		}
		got, err := c.Scan(t.Context(), "k", 0, consScanAll)
		if err != nil || len(got) != 2 || !bytes.Equal(got[0].Data, v1.Data) || !bytes.Equal(got[1].Data, v2.Data) {
			t.Errorf("Scan = %s, %v; want v1 and v2 with their data", consFormatAll(got), err)
		}
	})

	t.Run("EmptyData", func(t *testing.T) {
		c := consOpen(t, newConsensus)
		consMustCAS(t, c, "k", nil, persist.VersionedData{SeqNo: 1, Data: nil})
		consMustCAS(t, c, "k", consSeq(1), persist.VersionedData{SeqNo: 2, Data: []byte{}})
		got, err := c.Scan(t.Context(), "k", 0, consScanAll)
		if err != nil || len(got) != 2 || len(got[0].Data) != 0 || len(got[1].Data) != 0 {
			t.Fatalf("Scan = %s, %v; want v1 and v2, both empty", consFormatAll(got), err)
		}
	})

	t.Run("DataNotAliased", func(t *testing.T) {
		c := consOpen(t, newConsensus)
		buf := []byte("original")
		consMustCAS(t, c, "k", nil, persist.VersionedData{SeqNo: 1, Data: buf})
		copy(buf, "MUTATED!")
		head := consHead(t, c, "k")
		if head == nil || string(head.Data) != "original" {
			t.Fatalf("Head after mutating the CAS argument = %s; want %q", consFormatPtr(head), "original")
		}
		copy(head.Data, "MUTATED!")
		got, err := c.Scan(t.Context(), "k", 0, consScanAll)
		if err != nil || len(got) != 1 || string(got[0].Data) != "original" {
			t.Fatalf("Scan after mutating Head's result = %s, %v; want %q", consFormatAll(got), err, "original")
		}
	})

	t.Run("CanceledContext", func(t *testing.T) {
		c := consOpen(t, newConsensus)
		consWrite(t, c, "k", 1)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := c.Head(ctx, "k")
		consWantDeterminateError(t, err, "Head")
		ok, err := c.CompareAndSet(ctx, "k", consSeq(1), persist.VersionedData{SeqNo: 2, Data: []byte("canceled")})
		if ok {
			t.Error("CAS with a canceled context committed")
		}
		consWantDeterminateError(t, err, "CompareAndSet")
		_, err = c.Scan(ctx, "k", 0, consScanAll)
		consWantDeterminateError(t, err, "Scan")
		_, err = c.Truncate(ctx, "k", 1)
		consWantDeterminateError(t, err, "Truncate")
		_, err = c.ListKeys(ctx)
		consWantDeterminateError(t, err, "ListKeys")
		consWantLog(t, c, "k", 1, 1)
	})

	t.Run("ConcurrentCompareAndSet", func(t *testing.T) {
		c := consOpen(t, newConsensus)
		cs := make([]persist.Consensus, ConsensusRaceWriters)
		for i := range cs {
			cs[i] = c
		}
		ConsensusRace(t, "race", ConsensusRaceRounds, cs...)
	})

	t.Run("Watch", func(t *testing.T) {
		c := consOpen(t, newConsensus)
		w, ok := c.(consensusWatcher)
		if !ok {
			t.Skipf("%T has no Watch method", c)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		ch1 := consWatch(t, w, ctx)
		ch2 := consWatch(t, w, ctx)
		idle := consWatch(t, w, t.Context()) // never read until the burst is over

		consWrite(t, c, "w", 1)
		consWantRing(t, ch1, "w")
		consWantRing(t, ch2, "w")

		// A watcher that reads nothing must not hold up commits.
		for seq := persist.SeqNo(2); seq <= consWatchBurst; seq++ {
			consMustCAS(t, c, "w", consSeq(seq-1), consVersion("w", seq))
		}
		// ch1 and ch2 filled up too; empty them so "other" has room.
		consDrain(ch1)
		consDrain(ch2)
		consMustCAS(t, c, "other", nil, consVersion("other", 1))
		consWantRing(t, ch1, "other")
		consWantRing(t, ch2, "other")
		if len(idle) == 0 {
			t.Error("the idle watcher's channel is empty after the burst; want some rings")
		}

		cancel()
		consWantClosed(t, ch1)
		consWantClosed(t, ch2)

		done, stop := context.WithCancel(t.Context())
		stop()
		if ch, err := w.Watch(done); err == nil {
			consWantClosed(t, ch)
		}
	})

	t.Run("WatchClosedByClose", func(t *testing.T) {
		// Not consOpen: this subtest closes the Consensus itself, once.
		c := newConsensus(t)
		w, ok := c.(consensusWatcher)
		if !ok {
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			t.Skipf("%T has no Watch method", c)
		}
		ch := consWatch(t, w, t.Context())
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		consWantClosed(t, ch)
	})
}

// ConsensusRace races one writer goroutine per element of cs (the same
// Consensus repeated, or several opened on one store) to CAS key from empty
// up to rounds versions, then checks the outcome with ConsensusRaceCheck.
func ConsensusRace(t testing.TB, key string, rounds int, cs ...persist.Consensus) {
	t.Helper()
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		won = make(map[string][]persist.SeqNo)
	)
	for i, c := range cs {
		writer := fmt.Sprintf("w%d", i)
		wg.Go(func() {
			got, err := ConsensusRaceWriter(t.Context(), c, key, writer, rounds)
			if err != nil {
				t.Errorf("writer %s: %v", writer, err)
			}
			mu.Lock()
			won[writer] = got
			mu.Unlock()
		})
	}
	wg.Wait()
	ConsensusRaceCheck(t, cs[0], key, rounds, won)
}

// ConsensusRaceWriter is one writer of a race (see ConsensusRace): it reads
// the head of key and CASes the next version, writing ConsensusRaceData,
// until the head reaches rounds. It returns the SeqNos it committed. It
// also checks what a linearizable log owes a single client: heads it reads
// never go backwards, and a Head after its own committed CAS sees it. Run
// it in other processes to race them (report the SeqNos back to the
// checking process).
func ConsensusRaceWriter(ctx context.Context, c persist.Consensus, key, writer string, rounds int) ([]persist.SeqNo, error) {
	var won []persist.SeqNo
	var seen persist.SeqNo
	for {
		head, err := c.Head(ctx, key)
		if err != nil {
			return won, fmt.Errorf("head: %w", err)
		}
		var expected *persist.SeqNo
		next := persist.SeqNo(1)
		if head != nil {
			if head.SeqNo < seen {
				return won, fmt.Errorf("head went backwards: %s after %s", head.SeqNo, seen)
			}
			seen = head.SeqNo
			if head.SeqNo >= persist.SeqNo(rounds) {
				return won, nil
			}
			expected = &head.SeqNo
			next = head.SeqNo + 1
		}
		ok, err := c.CompareAndSet(ctx, key, expected, persist.VersionedData{SeqNo: next, Data: ConsensusRaceData(writer, next)})
		if err != nil {
			return won, fmt.Errorf("cas %s: %w", next, err)
		}
		if !ok {
			continue
		}
		won = append(won, next)
		after, err := c.Head(ctx, key)
		if err != nil {
			return won, fmt.Errorf("head after cas: %w", err)
		}
		if after == nil || after.SeqNo < next {
			return won, fmt.Errorf("head after committing %s is %s", next, consFormatPtr(after))
		}
	}
}

// ConsensusRaceData is what writer stores at seq in a race.
func ConsensusRaceData(writer string, seq persist.SeqNo) []byte {
	return fmt.Appendf(nil, "%s wrote %s", writer, seq)
}

// ConsensusRaceCheck checks the outcome of a race on key: won maps each
// writer to the SeqNos it committed. Exactly one writer won each SeqNo in
// [1, rounds], and the log holds exactly the winners' writes.
func ConsensusRaceCheck(t testing.TB, c persist.Consensus, key string, rounds int, won map[string][]persist.SeqNo) {
	t.Helper()
	winner := make(map[persist.SeqNo]string)
	for writer, seqs := range won {
		for _, seq := range seqs {
			if other, ok := winner[seq]; ok {
				t.Errorf("%s won by both %s and %s", seq, other, writer)
			}
			winner[seq] = writer
		}
	}
	if len(winner) != rounds {
		t.Errorf("%d SeqNos won, want %d", len(winner), rounds)
	}
	log, err := c.Scan(t.Context(), key, 0, consScanAll)
	if err != nil {
		t.Fatalf("Scan(%s): %v", key, err)
	}
	if len(log) != rounds {
		t.Errorf("log has %d versions, want %d", len(log), rounds)
	}
	for i, v := range log {
		if want := persist.SeqNo(i + 1); v.SeqNo != want {
			t.Fatalf("log[%d] is %s, want %s", i, v.SeqNo, want)
		}
		writer, ok := winner[v.SeqNo]
		if !ok {
			t.Errorf("%s = %q, but no writer reported winning it", v.SeqNo, v.Data)
			continue
		}
		if want := ConsensusRaceData(writer, v.SeqNo); !bytes.Equal(v.Data, want) {
			t.Errorf("%s = %q, want the winner's %q", v.SeqNo, v.Data, want)
		}
	}
}

// BenchmarkConsensusCompareAndSet measures sequential CompareAndSet on one
// key, each appending 1 KiB at head+1: the cost of one persist state
// change. It reports cas/s.
func BenchmarkConsensusCompareAndSet(b *testing.B, c persist.Consensus) {
	key := fmt.Sprintf("bench-%x", rand.Uint64())
	data := consRandom(1<<10, 3)
	var expected *persist.SeqNo
	var seq persist.SeqNo
	for b.Loop() {
		seq++
		ok, err := c.CompareAndSet(b.Context(), key, expected, persist.VersionedData{SeqNo: seq, Data: data})
		if err != nil || !ok {
			b.Fatalf("CAS %s = %v, %v; want committed", seq, ok, err)
		}
		expected = consSeq(seq)
	}
	b.ReportMetric(float64(seq)/b.Elapsed().Seconds(), "cas/s")
}

func consOpen(t *testing.T, newConsensus func(t *testing.T) persist.Consensus) persist.Consensus {
	t.Helper()
	c := newConsensus(t)
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

func consSeq(s persist.SeqNo) *persist.SeqNo { return &s }

// consVersion is the version TestConsensus writes at seq of key.
func consVersion(key string, seq persist.SeqNo) persist.VersionedData {
	return persist.VersionedData{SeqNo: seq, Data: fmt.Appendf(nil, "%s@%s", key, seq)}
}

// consWrite writes versions 1 through n of key.
func consWrite(t *testing.T, c persist.Consensus, key string, n persist.SeqNo) {
	t.Helper()
	var expected *persist.SeqNo
	for seq := persist.SeqNo(1); seq <= n; seq++ {
		consMustCAS(t, c, key, expected, consVersion(key, seq))
		expected = consSeq(seq)
	}
}

// consCAS writes consVersion(key, seq) if the head is expected and reports
// whether it committed; an error fails the test.
func consCAS(t *testing.T, c persist.Consensus, key string, expected *persist.SeqNo, seq persist.SeqNo) bool {
	t.Helper()
	ok, err := c.CompareAndSet(t.Context(), key, expected, consVersion(key, seq))
	if err != nil {
		t.Fatalf("CAS(%s, expected %s, new %s): %v", key, consFormatSeq(expected), seq, err)
	}
	return ok
}

func consMustCAS(t *testing.T, c persist.Consensus, key string, expected *persist.SeqNo, v persist.VersionedData) {
	t.Helper()
	ok, err := c.CompareAndSet(t.Context(), key, expected, v)
	if err != nil || !ok {
		t.Fatalf("CAS(%s, expected %s, new %s) = %v, %v; want committed", key, consFormatSeq(expected), v.SeqNo, ok, err)
	}
}

func consHead(t *testing.T, c persist.Consensus, key string) *persist.VersionedData {
	t.Helper()
	head, err := c.Head(t.Context(), key)
	if err != nil {
		t.Fatalf("Head(%s): %v", key, err)
	}
	return head
}

// consWantHead checks that key's head is consVersion(key, seq).
func consWantHead(t *testing.T, c persist.Consensus, key string, seq persist.SeqNo) {
	t.Helper()
	head := consHead(t, c, key)
	want := consVersion(key, seq)
	if head == nil || head.SeqNo != want.SeqNo || !bytes.Equal(head.Data, want.Data) {
		t.Fatalf("Head(%s) = %s, want %s", key, consFormatPtr(head), consFormat(want))
	}
}

// consWantLog checks that key's log is consVersion(key, first..last).
func consWantLog(t *testing.T, c persist.Consensus, key string, first, last persist.SeqNo) {
	t.Helper()
	got, err := c.Scan(t.Context(), key, 0, consScanAll)
	if err != nil {
		t.Fatalf("Scan(%s): %v", key, err)
	}
	consCompareLog(t, "Scan("+key+")", got, key, first, last)
	consWantHead(t, c, key, last)
}

// consCompareLog checks that got is consVersion(key, first..last), empty
// when first > last.
func consCompareLog(t *testing.T, what string, got []persist.VersionedData, key string, first, last persist.SeqNo) {
	t.Helper()
	var want []persist.VersionedData
	for seq := first; seq <= last; seq++ {
		want = append(want, consVersion(key, seq))
	}
	if !slices.EqualFunc(got, want, func(a, b persist.VersionedData) bool {
		return a.SeqNo == b.SeqNo && bytes.Equal(a.Data, b.Data)
	}) {
		t.Errorf("%s = %s, want %s", what, consFormatAll(got), consFormatAll(want))
	}
}

func consWantKeys(t *testing.T, c persist.Consensus, want ...string) {
	t.Helper()
	got, err := c.ListKeys(t.Context())
	if err != nil {
		t.Fatalf("ListKeys: %v", err)
	}
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Errorf("ListKeys = %q, want %q", got, want)
	}
}

// consWantDeterminate checks that err, if any, says the operation did not
// take effect.
func consWantDeterminate(t *testing.T, err error, what string) {
	t.Helper()
	if persist.IsIndeterminate(err) {
		t.Errorf("%s: indeterminate error %v; want a determinate one", what, err)
	}
}

func consWantDeterminateError(t *testing.T, err error, what string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s with a canceled context: no error", what)
		return
	}
	consWantDeterminate(t, err, what+" with a canceled context")
}

func consWatch(t *testing.T, w consensusWatcher, ctx context.Context) <-chan string {
	t.Helper()
	ch, err := w.Watch(ctx)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	return ch
}

// consWantRing waits for key on ch, skipping rings of other keys (and
// repeats: a doorbell may ring more than once).
func consWantRing(t *testing.T, ch <-chan string, key string) {
	t.Helper()
	timeout := time.After(consWait)
	for {
		select {
		case got, ok := <-ch:
			if !ok {
				t.Fatalf("watch channel closed while waiting for %q", key)
			}
			if got == key {
				return
			}
		case <-timeout:
			t.Fatalf("no ring for %q within %v", key, consWait)
		}
	}
}

// consDrain empties ch's buffer without waiting.
func consDrain(ch <-chan string) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

func consWantClosed(t *testing.T, ch <-chan string) {
	t.Helper()
	timeout := time.After(consWait)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatalf("watch channel still open %v after its end", consWait)
		}
	}
}

func consRandom(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func consFormat(v persist.VersionedData) string {
	if len(v.Data) > 32 {
		return fmt.Sprintf("%s(%d bytes)", v.SeqNo, len(v.Data))
	}
	return fmt.Sprintf("%s(%q)", v.SeqNo, v.Data)
}

func consFormatPtr(v *persist.VersionedData) string {
	if v == nil {
		return "nil"
	}
	return consFormat(*v)
}

func consFormatAll(vs []persist.VersionedData) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = consFormat(v)
	}
	return fmt.Sprint(s)
}

func consFormatSeq(s *persist.SeqNo) string {
	if s == nil {
		return "nil"
	}
	return s.String()
}
