package redissink

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shardtail/shardtail/consumer"
	"github.com/shardtail/shardtail/row"
)

//go:embed library.lua
var library string

// The functions of library.lua.
const (
	fnApply = "shardtail_apply"
	fnClaim = "shardtail_claim"
	// FunctionGet is the Redis function a reader calls to read a row of
	// the active generation atomically with the pointer:
	// FCALL_RO shardtail_get 1 <namespace>active <key JSON array>.
	FunctionGet = "shardtail_get"
)

// The control keys of a namespace, after its prefix.
const (
	keyCheckpoint  = "checkpoint"
	keyActive      = "active"
	keyLoading     = "loading"
	keyGenCounter  = "generation"
	keyGenerations = "generations"
)

// Config configures a Sink.
type Config struct {
	// Client is the Redis connection; the Sink does not close it.
	Client *redis.Client
	// Namespace prefixes every key of the sink, control keys included
	// ("orders:").
	Namespace string
	// Key names the KEY columns, in KEY order.
	Key []string
	// Tombstones keeps a deleted row's key as a hash with its deletion
	// timestamp and no value, for readers that must tell "deleted" from
	// "never existed" (and so that no late write can recreate it).
	Tombstones bool
	// Logger receives generation switches, cleanups and retries; nil
	// discards.
	Logger *slog.Logger
	// RetryFor is how long a write keeps retrying while Redis is
	// unreachable (a restart) before Write or Commit fails;
	// DefaultRetryFor if zero, no retry if negative.
	RetryFor time.Duration
}

// DefaultRetryFor is Config.RetryFor's default: long enough for a Redis
// restart that replays its AOF.
const DefaultRetryFor = 30 * time.Second

// Retry backoff bounds while Redis is unreachable.
const (
	retryMinDelay = 50 * time.Millisecond
	retryMaxDelay = 2 * time.Second
)

// Validate reports which field is wrong.
func (c *Config) Validate() error {
	switch {
	case c.Client == nil:
		return errors.New("redissink config: Client is required")
	case c.Namespace == "":
		return errors.New("redissink config: Namespace is required")
	case len(c.Key) == 0:
		return errors.New("redissink config: Key needs at least one column")
	case c.Client.Options().StreamingCredentialsProvider != nil:
		// Snapshot chunks load on a connection of the Sink's own
		// (bulkConn), which authenticates with a fixed password or a
		// CredentialsProvider only.
		return errors.New("redissink config: a Client with a StreamingCredentialsProvider is not supported")
	}
	return nil
}

// Stats counts what a Sink did; read it with Sink.Stats.
type Stats struct {
	// Applied is the number of key writes (sets and deletes) Redis did.
	Applied int64
	// Stale is the number of key writes the timestamp guard rejected: the
	// stored row was as new or newer (a replayed chunk, a late writer).
	Stale int64
	// KeyViolations counts keys with more than one row at one timestamp
	// (or a diff above 1): the key is not unique; the last row wins.
	KeyViolations int64
	// Generations counts the generations this Sink switched readers to.
	Generations int64
	// Deleted counts the keys of old generations this Sink deleted.
	Deleted int64
}

// Sink lands a consumer's batches in Redis by the key contract, with the
// checkpoint in the same atomic step as each batch: it is both the
// consumer.Sink and the consumer.Checkpoint of consumer.Run. See the
// package documentation for the layout and rules.
//
// Load, Write, Commit and Abort are called from one goroutine (Run's);
// Stats may be called from any.
type Sink struct {
	cfg Config
	rdb *redis.Client
	log *slog.Logger

	cols []row.Column // nil until the first batch
	key  []int

	committed    consumer.Position // last loaded or committed
	committedEnc string            // its encoding in Redis
	active       string            // the active generation's prefix, "" if none
	loading      int64             // the generation this Sink claimed and loads, 0 if none
	staged       *stagedBatch      // written, awaiting Commit
	// inflight receives the outcome of the snapshot chunk being loaded in
	// the background (loadChunk), nil if none: loading one chunk while
	// the consumer fetches the next overlaps the source and Redis. Every
	// method but Stats waits for it before it sends anything (Write
	// converts its batch first), so chunks land in order and the
	// goroutine never outlives the Sink's use (Close waits too).
	inflight chan error
	// bulk is the connection snapshot chunks load on (loadChunk), nil
	// until the first or after a failure; used only by the chunk load.
	bulk *bulkConn

	applied, stale, violations, generations, deleted atomic.Int64
}

// stagedBatch is a closed batch between Write and Commit: its keys go to
// Redis with the checkpoint, in one call.
type stagedBatch struct {
	prefix  string
	loading int64
	ops     []op
}

// op is the net effect of a batch on one key.
type op struct {
	key   string // the key's JSON array, without prefix
	ts    uint64
	del   bool
	value []byte
}

// New loads the sink's Redis functions and returns a Sink. Call Load (Run
// does) before Write.
func New(ctx context.Context, cfg Config) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Sink{cfg: cfg, rdb: cfg.Client, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.cfg.RetryFor == 0 {
		s.cfg.RetryFor = DefaultRetryFor
	}
	if err := s.loadLibrary(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// loadLibrary installs library.lua. Redis keeps functions in its AOF, so a
// restarted server still has them; a flushed one gets them back on the
// next New.
func (s *Sink) loadLibrary(ctx context.Context) error {
	if err := s.rdb.FunctionLoadReplace(ctx, library).Err(); err != nil {
		return fmt.Errorf("load redis functions: %w", err)
	}
	return nil
}

// Stats returns what the Sink has done so far.
func (s *Sink) Stats() Stats {
	return Stats{
		Applied:       s.applied.Load(),
		Stale:         s.stale.Load(),
		KeyViolations: s.violations.Load(),
		Generations:   s.generations.Load(),
		Deleted:       s.deleted.Load(),
	}
}

func (s *Sink) ctl(name string) string { return s.cfg.Namespace + name }

// GenerationPrefix is the prefix of generation n's keys in namespace ns:
// "orders:" and 2 give "orders:g2:".
func GenerationPrefix(ns string, n int64) string {
	return ns + "g" + strconv.FormatInt(n, 10) + ":"
}

// encodePosition is a position as the checkpoint key holds it; the zero
// position (nothing committed) is the absent key, "".
func encodePosition(p consumer.Position) (string, error) {
	if p.Equal(consumer.Position{}) {
		return "", nil
	}
	b, err := json.Marshal(p)
	return string(b), err
}

// wait waits for the chunk loading in the background, if any, and returns
// its error.
func (s *Sink) wait() error {
	if s.inflight == nil {
		return nil
	}
	err := <-s.inflight
	s.inflight = nil
	return err
}

// Close waits for a snapshot chunk still loading in the background and
// closes the Sink's own connection for snapshot chunks. It does not close
// Config.Client.
func (s *Sink) Close() error {
	err := s.wait()
	if s.bulk != nil {
		err = errors.Join(err, s.bulk.Close())
		s.bulk = nil
	}
	return err
}

// Load returns the committed position and reads the active generation. It
// also finishes the deletion of old generations a previous process left.
func (s *Sink) Load(ctx context.Context) (consumer.Position, error) {
	s.wait() //nolint:errcheck // a chunk of the abandoned load: Load starts over
	vals, err := s.rdb.MGet(ctx, s.ctl(keyCheckpoint), s.ctl(keyActive)).Result()
	if err != nil {
		return consumer.Position{}, fmt.Errorf("load checkpoint: %w", err)
	}
	var pos consumer.Position
	enc, _ := vals[0].(string)
	if enc != "" {
		if err := json.Unmarshal([]byte(enc), &pos); err != nil {
			return consumer.Position{}, fmt.Errorf("load checkpoint %q: %w", enc, err)
		}
	}
	active, _ := vals[1].(string)
	if enc != "" && active == "" {
		return consumer.Position{}, fmt.Errorf("%w: %s", ErrNoActiveGeneration, s.ctl(keyCheckpoint))
	}
	s.committed, s.committedEnc, s.active = pos, enc, active
	s.loading, s.staged = 0, nil
	s.cleanup(ctx)
	return pos, nil
}

// Write converts b's updates to one write per key and sends a Partial
// chunk at once (fenced, without advancing the checkpoint); a closed batch
// waits for Commit, which sends it with the checkpoint. A snapshot chunk
// loads in the background while the caller fetches the next one: its
// error is returned by the next Write, Commit or Close.
func (s *Sink) Write(ctx context.Context, b consumer.Batch) error {
	// Converting the batch needs nothing from Redis: it overlaps the
	// chunk still loading, if any.
	if err := s.setColumns(b); err != nil {
		s.wait() //nolint:errcheck // the batch's error comes first
		return err
	}
	ops, err := s.consolidate(b)
	if err := errors.Join(s.wait(), err); err != nil {
		return err
	}
	st, err := s.target(ctx, b.Generation)
	if err != nil {
		return err
	}
	st.ops = ops
	if b.Partial && st.loading != 0 && b.Snapshot && allUpserts(st.ops) {
		expected := s.committedEnc
		done := make(chan error, 1)
		s.inflight = done
		go func() { // owned by s: every other method waits for it
			done <- s.retry(ctx, func() (bool, error) {
				err := s.loadChunk(ctx, st, expected)
				return err == nil, err
			})
		}()
		return nil
	}
	if b.Partial {
		// Idempotent (the guard rejects what an earlier attempt
		// wrote), so a retry after an ambiguous failure is safe.
		return s.retry(ctx, func() (bool, error) {
			_, err := s.apply(ctx, st, s.committedEnc, "")
			return err == nil, err
		})
	}
	s.staged = st
	return nil
}

// target returns an empty batch aimed at where a batch of the consumer's
// generation gen goes. A generation the checkpoint does not hold (the
// first snapshot, or a re-snapshot after a history loss) loads a new
// Redis generation that readers do not see until its commit; the first
// such batch claims it.
func (s *Sink) target(ctx context.Context, gen int64) (*stagedBatch, error) {
	if s.committed.Frontier != 0 && gen == s.committed.Generation {
		if s.active == "" {
			return nil, fmt.Errorf("%w: %s", ErrNoActiveGeneration, s.ctl(keyActive))
		}
		return &stagedBatch{prefix: s.active}, nil
	}
	if s.loading == 0 {
		// A claim whose reply was lost leaves a listed generation
		// nobody loads; cleanup deletes it.
		if err := s.retry(ctx, func() (bool, error) { err := s.claim(ctx); return err == nil, err }); err != nil {
			return nil, err
		}
	}
	return &stagedBatch{loading: s.loading, prefix: GenerationPrefix(s.cfg.Namespace, s.loading)}, nil
}

// Commit sends the staged batch and moves the checkpoint from expected to
// next in one atomic call; when the batch loaded a new generation, the
// same call makes it the active one. It fails with consumer.ErrFenced when
// the checkpoint, the active generation or this Sink's claim moved.
func (s *Sink) Commit(ctx context.Context, expected, next consumer.Position) error {
	if err := s.wait(); err != nil {
		s.staged = nil
		return err
	}
	st := s.staged
	s.staged = nil
	if st == nil {
		// A commit with no batch written (a caller that uses the Sink
		// as a bare checkpoint) still needs a generation to point at.
		var err error
		if st, err = s.target(ctx, next.Generation); err != nil {
			return err
		}
	}
	expEnc, err := encodePosition(expected)
	if err != nil {
		return err
	}
	nextEnc, err := encodePosition(next)
	if err != nil {
		return err
	}
	if nextEnc == "" {
		return errors.New("redissink: commit of the zero position")
	}
	err = s.retry(ctx, func() (bool, error) {
		_, err := s.apply(ctx, st, expEnc, nextEnc)
		if err == nil {
			return true, nil
		}
		// The call may or may not have happened (a connection lost
		// before the reply, or a client that resent it and got the
		// fence of its own first attempt): the checkpoint tells which.
		// Another writer cannot have committed next with st's
		// generation active unless it wrote this same batch (the
		// same feed between the same frontiers), so it counts as done.
		done, cerr := s.committedAs(ctx, st, nextEnc)
		switch {
		case done:
			return true, nil
		case errors.Is(err, consumer.ErrFenced):
			return false, err
		default:
			return false, cerr
		}
	})
	if err != nil {
		return err
	}
	s.committed, s.committedEnc = next, nextEnc
	if st.loading != 0 {
		old := s.active
		s.active, s.loading = st.prefix, 0
		s.generations.Add(1)
		s.log.Info("redis sink: readers switched to a new generation", "prefix", st.prefix, "previous", old)
		s.cleanup(ctx)
	}
	return nil
}

// allUpserts reports whether ops only set keys.
func allUpserts(ops []op) bool {
	for _, o := range ops {
		if o.del {
			return false
		}
	}
	return true
}

// loadChunk writes a snapshot chunk into the generation this Sink claimed,
// without the Lua guard: plain HSETs in one MULTI/EXEC, several times
// faster per key than the function (a big snapshot is most of a sink's
// writes), sent on the Sink's own connection (bulkConn), which costs the
// sink a fraction of go-redis's CPU per key. The guard has nothing to
// guard here: the generation is new (numbers are never reused), only this
// claim writes it, in order, and the snapshot is its first timestamp, so
// no stored row can be newer; a retry of the chunk writes the same values
// again. The fence still holds: the transaction WATCHes the checkpoint and
// the claim, and fails whole (consumer.ErrFenced) if either moved.
func (s *Sink) loadChunk(ctx context.Context, st *stagedBatch, expected string) error {
	if s.bulk == nil {
		c, err := dialBulk(ctx, s.rdb.Options())
		if err != nil {
			return err
		}
		s.bulk = c
	}
	loading := strconv.FormatInt(st.loading, 10)
	err := s.bulk.load(ctx, s.ctl(keyCheckpoint), s.ctl(keyLoading), expected, loading, st.prefix, st.ops)
	if err != nil && !errors.Is(err, consumer.ErrFenced) {
		// The connection is in an unknown state: the next chunk (or
		// retry) dials a new one.
		s.bulk.Close() //nolint:errcheck // the load's error is the one to report
		s.bulk = nil
	}
	if err != nil {
		return fmt.Errorf("load %d keys: %w", len(st.ops), err)
	}
	s.applied.Add(int64(len(st.ops)))
	return nil
}

// committedAs reports whether Redis holds next as the checkpoint with st's
// generation active, that is, whether an apply whose reply was lost
// happened; the error is the original's when Redis cannot be asked.
func (s *Sink) committedAs(ctx context.Context, st *stagedBatch, next string) (bool, error) {
	vals, err := s.rdb.MGet(ctx, s.ctl(keyCheckpoint), s.ctl(keyActive)).Result()
	if err != nil {
		return false, err
	}
	cp, _ := vals[0].(string)
	active, _ := vals[1].(string)
	if cp == next && active == st.prefix {
		return true, nil
	}
	return false, errors.New("redis sink: the batch was not applied")
}

// retry calls attempt until it reports done, fails with a fence or
// protocol error, or Config.RetryFor passes while Redis is unreachable.
func (s *Sink) retry(ctx context.Context, attempt func() (bool, error)) error {
	deadline := time.Now().Add(s.cfg.RetryFor)
	delay := retryMinDelay
	for {
		done, err := attempt()
		if done {
			return nil
		}
		if errors.Is(err, consumer.ErrFenced) || !retryable(err) || time.Now().After(deadline) {
			return err
		}
		s.log.Warn("redis sink: retrying", "err", err, "in", delay)
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, retryMaxDelay)
	}
}

// retryable reports whether err may be Redis being away (a lost
// connection, a server loading its AOF) rather than a refusal.
func retryable(err error) bool {
	if err == nil {
		return true // not applied, as committedAs found: try again
	}
	var re redis.Error
	if errors.As(err, &re) {
		msg := err.Error()
		return strings.HasPrefix(msg, "LOADING") || strings.HasPrefix(msg, "BUSY") || strings.HasPrefix(msg, "TRYAGAIN")
	}
	return true // network errors
}

// Abort forgets the staged batch and the claimed generation: Run resumes
// from the checkpoint, and a new snapshot claims a new generation (the
// abandoned one is deleted by the next cleanup).
func (s *Sink) Abort(context.Context) error {
	s.wait() //nolint:errcheck // the chunk belongs to the load being abandoned
	s.staged, s.loading = nil, 0
	return nil
}

// setColumns learns the relation's columns from the first batch and
// checks that later batches agree.
func (s *Sink) setColumns(b consumer.Batch) error {
	if len(b.Columns) > 1 {
		return fmt.Errorf("%w: the batch has %d", ErrSeveralCollections, len(b.Columns))
	}
	if len(b.Columns) == 0 {
		if s.cols == nil && len(b.Updates) > 0 {
			return errors.New("redissink: a batch with updates and no columns")
		}
		return nil
	}
	cols, err := relationColumns(b.Columns[0])
	if err != nil {
		return err
	}
	if s.cols != nil {
		if !(row.Schema{Columns: cols}).Equal(row.Schema{Columns: s.cols}) {
			return fmt.Errorf("%w: %v, was %v", ErrColumnsChanged, cols, s.cols)
		}
		return nil
	}
	key, err := consumer.KeyColumns(cols, s.cfg.Key)
	if err != nil {
		return err
	}
	s.cols, s.key = cols, key
	return nil
}

// The buffers consolidate renders values into: valueArena bytes each, a
// new one when less than valueReserve bytes are left (a value that
// outgrows what is left moves to a larger copy on its own, so any size is
// correct; these only make that rare).
const (
	valueArena   = 256 << 10
	valueReserve = 4 << 10
)

// consolidate reduces b to one write per key, its last state in the batch:
// an insertion at a key's latest timestamp wins over a retraction at that
// timestamp (an update is both, in no set order), a retraction alone is a
// delete.
func (s *Sink) consolidate(b consumer.Batch) ([]op, error) {
	ops := make([]op, 0, len(b.Updates))
	at := make(map[string]int, len(b.Updates))
	r := make(row.Row, len(s.cols))
	var buf []byte
	// The values share one buffer: a fresh one when it is full, so
	// earlier values keep theirs.
	var values []byte
	for _, u := range b.Updates {
		if len(u.Values) != len(s.cols) {
			return nil, fmt.Errorf("%w: %d values for %d columns", ErrBadValue, len(u.Values), len(s.cols))
		}
		insert, del := u.Diff > 0, u.Diff < 0
		switch u.State {
		case "upsert", "insert":
			insert = true
		case "delete":
			del = true
		case "key_violation":
			s.violations.Add(1)
			continue
		}
		if !insert && !del {
			continue
		}
		if u.Diff > 1 {
			s.violations.Add(1)
		}
		for i, v := range u.Values {
			d, err := datum(s.cols[i].Type, v)
			if err != nil {
				return nil, fmt.Errorf("column %q: %w", s.cols[i].Name, err)
			}
			r[i] = d
		}
		buf = consumer.KeyJSON(buf[:0], "", s.cols, s.key, r)
		k := string(buf)
		next := op{key: k, ts: u.Timestamp, del: del}
		if insert {
			if cap(values)-len(values) < valueReserve {
				values = make([]byte, 0, valueArena)
			}
			start := len(values)
			values = consumer.ValueJSON(values, s.cols, r)
			next.value = values[start:len(values):len(values)]
		}
		i, seen := at[k]
		if !seen {
			at[k] = len(ops)
			ops = append(ops, next)
			continue
		}
		prev := &ops[i]
		if prev.ts == u.Timestamp && !prev.del {
			if insert {
				s.violations.Add(1)
				*prev = next
			}
			continue // a retraction of the row this timestamp replaced
		}
		*prev = next
	}
	return ops, nil
}

// claim starts loading a new generation (shardtail_claim).
func (s *Sink) claim(ctx context.Context) error {
	keys := []string{s.ctl(keyCheckpoint), s.ctl(keyLoading), s.ctl(keyGenCounter), s.ctl(keyGenerations)}
	n, err := s.fcall(ctx, fnClaim, keys, s.committedEnc).Int64()
	if err != nil {
		return fmt.Errorf("claim a new generation: %w", fencedErr(err))
	}
	s.loading = n
	return nil
}

// apply sends st (and, when next is set, the checkpoint, which must be
// expected) in one FCALL: one round trip per batch, whatever its size.
func (s *Sink) apply(ctx context.Context, st *stagedBatch, expected, next string) (int64, error) {
	keys := make([]string, 0, 3+len(st.ops))
	keys = append(keys, s.ctl(keyCheckpoint), s.ctl(keyActive), s.ctl(keyLoading))
	args := make([]any, 0, 5+2*len(st.ops))
	loading := ""
	if st.loading != 0 {
		loading = strconv.FormatInt(st.loading, 10)
	}
	tomb := "0"
	if s.cfg.Tombstones {
		tomb = "1"
	}
	args = append(args, expected, next, loading, st.prefix, tomb)
	for _, o := range st.ops {
		keys = append(keys, st.prefix+o.key)
		if o.del {
			args = append(args, "d"+strconv.FormatUint(o.ts, 10))
		} else {
			args = append(args, "u"+strconv.FormatUint(o.ts, 10), o.value)
		}
	}
	res, err := s.fcall(ctx, fnApply, keys, args...).Int64Slice()
	if err != nil {
		return 0, fmt.Errorf("apply %d keys: %w", len(st.ops), fencedErr(err))
	}
	s.applied.Add(res[0])
	s.stale.Add(res[1])
	return res[0], nil
}

// fcall calls a function of the library, loading the library first if
// Redis lost it (a server restored without its functions).
func (s *Sink) fcall(ctx context.Context, fn string, keys []string, args ...any) *redis.Cmd {
	cmd := s.rdb.FCall(ctx, fn, keys, args...)
	if err := cmd.Err(); err != nil && strings.Contains(err.Error(), "Function not found") {
		if s.loadLibrary(ctx) == nil {
			cmd = s.rdb.FCall(ctx, fn, keys, args...)
		}
	}
	return cmd
}

// fencedErr maps the library's FENCED errors to consumer.ErrFenced.
func fencedErr(err error) error {
	if err != nil && strings.HasPrefix(err.Error(), "FENCED") {
		return fmt.Errorf("%w: %s", consumer.ErrFenced, err.Error())
	}
	return err
}
