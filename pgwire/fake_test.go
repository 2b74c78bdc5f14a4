package pgwire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
	"strconv"
	"strings"
	"sync"
	"time"
)

// fakeBackend is a Backend with a toy SQL, for tests:
//
//	select N        N rows of one int8 column "n" (1..N), in batches of 7
//	stream          int8 rows in batches of 3 every few milliseconds, until canceled
//	sleep           blocks until canceled
//	copy out        COPY TO STDOUT of three text lines
//	copy in         COPY FROM STDIN, kept in fakeBackend.copied
//	error CODE      an error with SQLSTATE CODE, detail, hint and position
//	error plain     an error without SQLSTATE
//	notice          like SUBSCRIBE: a NOTICE 01000 after RowDescription, then one row
//	echo X / $1     one text row with X or the parameter
//	big N           one text row of N bytes
//	set K = V       SET, reporting ParameterStatus K
//	begin, commit, rollback
//	panic           panics (only when allowPanic)
//	tick            like an idle subscriber: a ReadyResult of one int8 row per
//	                fakeBackend.tick, parked in between, until canceled
//	tickonce        tick, ending after its first row
//
// Statements are separated by ';'.
type fakeBackend struct {
	roles      map[string]Role // nil: every user exists and needs no password
	allowPanic bool

	mu      sync.Mutex
	open    int           // sessions open
	closed  int           // sessions closed
	ended   int           // long-running results (stream, sleep) that ended
	copied  bytes.Buffer  // data received by "copy in"
	running chan string   // receives the command when a long-running result starts
	ticks   int           // mu: ticks so far
	ticked  chan struct{} // mu: closed by the next tick
	// wakes are the parked tick results' wakes, called by the next tick.
	wakes map[*tickResult]func() // mu
	// stepping makes sessions QuerySteppers (steppingSession).
	stepping bool // mu
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{running: make(chan string, 64), ticked: make(chan struct{}), wakes: map[*tickResult]func(){}}
}

// tick gives every "tick" result its next row.
func (b *fakeBackend) tick() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ticks++
	close(b.ticked)
	b.ticked = make(chan struct{})
	for r, wake := range b.wakes {
		delete(b.wakes, r)
		wake()
	}
}

// tickState returns the ticks so far and the channel the next one closes.
func (b *fakeBackend) tickState() (int, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ticks, b.ticked
}

func (b *fakeBackend) Role(ctx context.Context, user string) (Role, error) {
	if b.roles == nil {
		return Role{}, nil
	}
	r, ok := b.roles[user]
	if !ok {
		return Role{}, fmt.Errorf("lookup %q: %w", user, ErrUnknownRole)
	}
	return r, nil
}

func (b *fakeBackend) OpenSession(ctx context.Context, info ConnInfo) (Session, error) {
	if info.Database == "nodb" {
		return nil, Errorf("3D000", "database \"nodb\" does not exist")
	}
	b.mu.Lock()
	b.open++
	stepping := b.stepping
	b.mu.Unlock()
	s := &fakeSession{b: b, info: info, tx: TxIdle}
	if stepping {
		return steppingSession{s}, nil
	}
	return s, nil
}

// steppingSession is a fakeSession that is a QueryStepper, as the
// adapter's session is: its simple queries' results can park.
type steppingSession struct{ *fakeSession }

func (s steppingSession) QuerySteps(ctx context.Context, sql string) QuerySteps {
	next, stop := iter.Pull2(s.Query(ctx, sql))
	return &fakeSteps{next: next, stop: stop}
}

// fakeSteps runs a fakeSession's Query a statement at a time.
type fakeSteps struct {
	next func() (Result, error, bool)
	stop func()
}

func (q *fakeSteps) Next(ctx context.Context) (Result, error) {
	res, err, _ := q.next()
	return res, err
}

func (q *fakeSteps) Stop() { q.stop() }

// started signals that a long-running result began, without ever blocking.
func (b *fakeBackend) started(cmd string) {
	select {
	case b.running <- cmd:
	default:
	}
}

func (b *fakeBackend) counts() (open, closed, ended int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.open, b.closed, b.ended
}

func (b *fakeBackend) copiedData() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.copied.String()
}

type fakeSession struct {
	b      *fakeBackend
	info   ConnInfo
	tx     TxStatus
	closed bool
}

func (s *fakeSession) Parameters() map[string]string {
	return map[string]string{"is_superuser": "off"}
}

func (s *fakeSession) TxStatus() TxStatus { return s.tx }

func (s *fakeSession) Query(ctx context.Context, sql string) iter.Seq2[Result, error] {
	return func(yield func(Result, error) bool) {
		for _, stmt := range strings.Split(sql, ";") {
			stmt = strings.TrimSpace(stmt)
			if stmt == "" {
				continue
			}
			st, err := s.prepare(stmt, nil)
			var res Result
			if err == nil {
				res, err = s.run(ctx, st, nil, nil)
			}
			if err != nil && s.tx == TxInBlock {
				s.tx = TxFailed
			}
			if !yield(res, err) || err != nil {
				return
			}
		}
	}
}

func (s *fakeSession) Prepare(ctx context.Context, sql string, paramOIDs []uint32) (Statement, error) {
	return s.prepare(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(sql), ";")), paramOIDs)
}

func (s *fakeSession) Sync(ctx context.Context, failed bool) error {
	if failed && s.tx == TxInBlock {
		s.tx = TxFailed
	}
	return nil
}

func (s *fakeSession) Close() error {
	if s.closed {
		panic("fakeSession closed twice")
	}
	s.closed = true
	s.b.mu.Lock()
	s.b.closed++
	s.b.mu.Unlock()
	return nil
}

var (
	int8Field = Field{Name: "n", TypeOID: 20, TypeSize: 8, TypeMod: -1}
	textField = Field{Name: "echo", TypeOID: 25, TypeSize: -1, TypeMod: -1}
)

type fakeStmt struct {
	s      *fakeSession
	cmd    string // first word, lower case
	arg    string // the rest
	params []uint32
	fields []Field
}

func (s *fakeSession) prepare(sql string, paramOIDs []uint32) (*fakeStmt, error) {
	cmd, arg, _ := strings.Cut(sql, " ")
	st := &fakeStmt{s: s, cmd: strings.ToLower(cmd), arg: strings.TrimSpace(arg)}
	switch st.cmd {
	case "select", "stream", "notice", "tick", "tickonce":
		st.fields = []Field{int8Field}
	case "echo", "big":
		st.fields = []Field{textField}
	case "", "sleep", "copy", "error", "set", "begin", "commit", "rollback", "panic":
	default:
		return nil, Errorf("42601", "syntax error at or near \"%s\"", cmd).WithPosition(1)
	}
	if st.arg == "$1" {
		oid := uint32(25)
		if len(paramOIDs) > 0 && paramOIDs[0] != 0 {
			oid = paramOIDs[0]
		}
		st.params = []uint32{oid}
	}
	return st, nil
}

func (st *fakeStmt) ParamOIDs() []uint32 { return st.params }
func (st *fakeStmt) Fields() []Field     { return st.fields }
func (st *fakeStmt) Close()              {}

func (st *fakeStmt) Bind(ctx context.Context, params [][]byte, paramFormats, resultFormats []int16) (Portal, error) {
	p := &fakePortal{st: st, formats: resultFormats}
	for _, v := range params {
		p.params = append(p.params, bytes.Clone(v))
	}
	return p, nil
}

type fakePortal struct {
	st      *fakeStmt
	params  [][]byte
	formats []int16
}

func (p *fakePortal) Execute(ctx context.Context) (Result, error) {
	return p.st.s.run(ctx, p.st, p.params, p.formats)
}

func (p *fakePortal) Close() {}

// run executes a statement.
func (s *fakeSession) run(ctx context.Context, st *fakeStmt, params [][]byte, formats []int16) (Result, error) {
	if s.tx == TxFailed && st.cmd != "rollback" && st.cmd != "commit" {
		return nil, Errorf("25P02", "current transaction is aborted, commands ignored until end of transaction block")
	}
	binaryOut := len(formats) > 0 && formats[0] == FormatBinary
	fields := func() []Field {
		fs := append([]Field(nil), st.fields...)
		for i := range fs {
			if binaryOut {
				fs[i].Format = FormatBinary
			}
		}
		return fs
	}
	arg := st.arg
	if arg == "$1" && len(params) > 0 {
		arg = string(params[0])
	}
	switch st.cmd {
	case "":
		return EmptyResult(), nil
	case "select":
		n, err := strconv.Atoi(arg)
		if err != nil || n < 0 || n > 1e6 {
			return nil, Errorf("22P02", "invalid input syntax for type bigint: \"%s\"", arg)
		}
		return &intRows{fields: fields(), binary: binaryOut, total: n, batch: 7}, nil
	case "stream":
		s.b.started("stream")
		return &intRows{fields: fields(), binary: binaryOut, total: -1, batch: 3, b: s.b}, nil
	case "sleep":
		s.b.started("sleep")
		return &sleepResult{b: s.b}, nil
	case "tick", "tickonce":
		seen, _ := s.b.tickState()
		return &tickResult{b: s.b, binary: binaryOut, seen: seen, once: st.cmd == "tickonce"}, nil
	case "notice":
		msgs := [][]byte{
			AppendNotice(nil, Notice{Code: "01000", Message: "streaming SUBSCRIBE rows directly requires a client that does not buffer output"}),
			AppendDataRow(nil, [][]byte{encodeInt8(1, binaryOut)}),
		}
		return &StaticResult{Desc: Description{Kind: ResultRows, Fields: fields()}, Messages: msgs, CommandTag: "SELECT 1"}, nil
	case "echo":
		return &StaticResult{Desc: Description{Kind: ResultRows, Fields: fields()}, Messages: [][]byte{AppendDataRow(nil, [][]byte{[]byte(arg)})}, CommandTag: "SELECT 1"}, nil
	case "big":
		n, err := strconv.Atoi(arg)
		if err != nil || n < 0 || n > 1<<23 {
			return nil, Errorf("22023", "big: size out of range")
		}
		row := AppendDataRow(nil, [][]byte{bytes.Repeat([]byte{'x'}, n)})
		return &StaticResult{Desc: Description{Kind: ResultRows, Fields: fields()}, Messages: [][]byte{row}, CommandTag: "SELECT 1"}, nil
	case "copy":
		col := []Field{{Name: "line", TypeOID: 25, TypeSize: -1, TypeMod: -1}}
		switch arg {
		case "out":
			var msgs [][]byte
			for i := 1; i <= 3; i++ {
				msgs = append(msgs, AppendCopyData(nil, fmt.Appendf(nil, "line%d\n", i)))
			}
			return &StaticResult{Desc: Description{Kind: ResultCopyOut, Fields: col}, Messages: msgs, CommandTag: "COPY 3"}, nil
		case "in":
			return &copyInResult{b: s.b, fields: col}, nil
		}
		return nil, Errorf("42601", "syntax error at or near \"%s\"", arg)
	case "error":
		if arg == "plain" {
			return nil, errors.New("plain failure")
		}
		return nil, Errorf(arg, "fake error %s", arg).WithDetail("fake detail").WithHint("fake hint").WithPosition(3)
	case "set":
		name, value, _ := strings.Cut(arg, "=")
		return CommandResult("SET", AppendParameterStatus(nil, strings.TrimSpace(name), strings.TrimSpace(value))), nil
	case "begin":
		s.tx = TxInBlock
		return CommandResult("BEGIN"), nil
	case "commit", "rollback":
		tag := strings.ToUpper(st.cmd)
		if s.tx == TxFailed {
			tag = "ROLLBACK"
		}
		s.tx = TxIdle
		return CommandResult(tag), nil
	case "panic":
		if s.b.allowPanic {
			panic("fake panic")
		}
		return nil, Errorf("42501", "panic not allowed")
	}
	return nil, fmt.Errorf("unhandled command %q", st.cmd)
}

func encodeInt8(v int64, binaryOut bool) []byte {
	if binaryOut {
		return binary.BigEndian.AppendUint64(nil, uint64(v))
	}
	return strconv.AppendInt(nil, v, 10)
}

// intRows yields 1, 2, ... in batches; total < 0 streams until canceled.
type intRows struct {
	fields []Field
	binary bool
	total  int
	batch  int
	next   int
	b      *fakeBackend // set for streams: counts their end
	closed bool
}

func (r *intRows) Describe() Description { return Description{Kind: ResultRows, Fields: r.fields} }

func (r *intRows) Next(ctx context.Context) ([][]byte, error) {
	if r.total >= 0 && r.next >= r.total {
		return nil, io.EOF
	}
	if r.total < 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	var msgs [][]byte
	for len(msgs) < r.batch && (r.total < 0 || r.next < r.total) {
		r.next++
		msgs = append(msgs, AppendDataRow(nil, [][]byte{encodeInt8(int64(r.next), r.binary)}))
	}
	return msgs, nil
}

func (r *intRows) Tag() string { return fmt.Sprintf("SELECT %d", r.next) }

func (r *intRows) Close() {
	if r.closed {
		panic("intRows closed twice")
	}
	r.closed = true
	if r.b != nil {
		r.b.mu.Lock()
		r.b.ended++
		r.b.mu.Unlock()
	}
}

// sleepResult blocks until canceled.
type sleepResult struct{ b *fakeBackend }

func (r *sleepResult) Describe() Description { return Description{Kind: ResultCommand} }
func (r *sleepResult) Next(ctx context.Context) ([][]byte, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
func (r *sleepResult) Tag() string { return "SLEEP" }
func (r *sleepResult) Close() {
	r.b.mu.Lock()
	r.b.ended++
	r.b.mu.Unlock()
}

// tickResult is an idle subscriber's result: a row for each tick after it
// started, waiting (parked, as a ReadyResult) in between.
var _ ReadyResult = (*tickResult)(nil)

type tickResult struct {
	b      *fakeBackend
	binary bool
	seen   int // ticks delivered (or before the start)
	sent   int
	once   bool // ends after its first row
}

func (r *tickResult) Describe() Description {
	return Description{Kind: ResultRows, Fields: []Field{int8Field}}
}

func (r *tickResult) Ready(wake func()) bool {
	r.b.mu.Lock()
	defer r.b.mu.Unlock()
	if r.b.ticks > r.seen || r.once && r.sent > 0 {
		return true
	}
	r.b.wakes[r] = wake
	return false
}

func (r *tickResult) Next(ctx context.Context) ([][]byte, error) {
	if r.once && r.sent > 0 {
		return nil, io.EOF
	}
	for {
		n, ch := r.b.tickState()
		if n > r.seen {
			r.seen++
			r.sent++
			return [][]byte{AppendDataRow(nil, [][]byte{encodeInt8(int64(r.seen), r.binary)})}, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ch:
		}
	}
}

func (r *tickResult) Tag() string { return fmt.Sprintf("SELECT %d", r.sent) }

func (r *tickResult) Close() {
	r.b.mu.Lock()
	r.b.ended++
	delete(r.b.wakes, r)
	r.b.mu.Unlock()
}

// copyInResult stores the data of COPY FROM STDIN and counts its lines.
type copyInResult struct {
	b      *fakeBackend
	fields []Field
	lines  int
}

func (r *copyInResult) Describe() Description {
	return Description{Kind: ResultCopyIn, Fields: r.fields}
}

func (r *copyInResult) CopyIn(ctx context.Context, in io.Reader) error {
	sc := bufio.NewScanner(in)
	var data bytes.Buffer
	for sc.Scan() {
		r.lines++
		data.Write(sc.Bytes())
		data.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return err
	}
	r.b.mu.Lock()
	r.b.copied.Write(data.Bytes())
	r.b.mu.Unlock()
	return nil
}

func (r *copyInResult) Next(ctx context.Context) ([][]byte, error) { return nil, io.EOF }
func (r *copyInResult) Tag() string                                { return fmt.Sprintf("COPY %d", r.lines) }
func (r *copyInResult) Close()                                     {}
