package feed

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/shardtail/shardtail/formatter"
	"github.com/shardtail/shardtail/row"
)

// TestBatchIsOneWrite: on a connection a stream took over, a batch of a
// rows event around a shared run and a progress event is one write system
// call (writev), the run written from the shape's shared bytes, not
// copied into the stream's buffer, and the client reads the event whole.
// (Through net/http's buffers it was three: 4 KiB of the run, the rest,
// the event's end.) A run shorter than directWrite (which bounds the
// copies through a ResponseWriter) is not copied either: a resume's runs
// are such, and copied they grew every stream's buffer to its whole
// catch-up.
//
// Compressed (gzip), the batch is one write too, of the run compressed
// once for the shape (the bytes formatter.Derived keeps with the rows),
// and the client decompresses the same events.
func TestBatchIsOneWrite(t *testing.T) {
	// Some 100 KiB of JSON, over directWrite (and, random, over it
	// compressed too); some 6 KiB, under it and over connDirectWrite
	// (compressed too).
	for _, rows := range []int{8000, 500} {
		t.Run(fmt.Sprintf("Identity/%dRows", rows), func(t *testing.T) { testBatchIsOneWrite(t, false, rows) })
		t.Run(fmt.Sprintf("Gzip/%dRows", rows), func(t *testing.T) { testBatchIsOneWrite(t, true, rows) })
	}
}

func testBatchIsOneWrite(t *testing.T, compressed bool, rows int) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	noErr(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err := net.Dial("tcp", ln.Addr().String())
	noErr(t, err)
	defer client.Close()
	conn, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer conn.Close()
	// Room for the whole batch, so that the one writev is not cut short
	// by a full socket.
	noErr(t, conn.(*net.TCPConn).SetWriteBuffer(4<<20))

	opts := &formatter.Options{Progress: true, Relation: row.Schema{Columns: []row.Column{{Name: "a", Type: row.TypeText}}}}
	var updates []row.Update
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range rows {
		updates = append(updates, row.Update{Row: row.Row{fmt.Sprintf("row %d %x", i, rnd.Uint64())}, Diff: 1})
	}
	piece := formatter.Shared(opts.Data(7, updates))
	s := &stream{h: &Handler{cfg: Config{}.withDefaults()}, conn: conn, f: sseFraming{}, wire: newJSONWire(opts.Columns(), "", ',')}
	pieces := formatter.Pieces(s.wire, piece, &s.enc, nil)
	if len(pieces) != 1 || len(pieces[0].Bytes) < connDirectWrite || !pieces[0].Shared() {
		t.Fatalf("got %d pieces, want one shared of at least %d bytes", len(pieces), connDirectWrite)
	}
	run := pieces[0].Bytes
	if compressed {
		s.gz = &gzipStream{}
		s.zbuf = s.gz.header(s.zbuf)
		if z := sharedPiece(pieces[0]); len(z.deflate) < connDirectWrite {
			t.Fatalf("the compressed run is %d bytes, want at least %d", len(z.deflate), connDirectWrite)
		} else {
			run = z.deflate
		}
	}
	// The client reads meanwhile (a socket under memory pressure holds
	// little).
	read := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(client)
		read <- b
	}()
	// The runtime may write to its netpoller's eventfd from this thread
	// meanwhile (a deadline's timer, waking the reader): the fewest of a
	// few batches' write system calls is the batch's own.
	const batches = 10
	fewest := int64(-1)
	for range batches {
		s.rows(s.wire, piece)
		s.buf = s.f.progress(s.buf, 8)
		if len(s.out) != 2 || unsafe.SliceData(s.out[1]) != unsafe.SliceData(run) {
			t.Fatalf("the batch's pieces before the write are %d, want the event's start and the shared run itself", len(s.out))
		}
		if n := len(s.buf) + len(s.zbuf); n >= connDirectWrite {
			t.Fatalf("the stream's buffers hold %d bytes besides the run of %d, want only the events' framing", n, len(run))
		}
		runtime.LockOSThread() // the write's system calls are this thread's
		before := threadWrites(t)
		ok := s.write()
		writes := threadWrites(t) - before
		runtime.UnlockOSThread()
		if !ok {
			t.Fatal("write failed")
		}
		if fewest < 0 || writes < fewest {
			fewest = writes
		}
		if len(s.out) != 0 || s.buf != nil {
			t.Fatalf("after the write the stream holds %d pieces and a buffer of %d bytes, want none", len(s.out), cap(s.buf))
		}
	}
	if fewest != 1 {
		t.Errorf("a batch took %d write system calls (the fewest of %d), want 1", fewest, batches)
	}
	if compressed {
		if !s.writeLast() {
			t.Fatal("write failed")
		}
	}
	conn.Close()
	got := <-read
	if compressed {
		zr, err := gzip.NewReader(bytes.NewReader(got))
		noErr(t, err)
		got, err = io.ReadAll(zr)
		noErr(t, err)
	}
	shared := pieces[0].Bytes
	want := strings.Repeat("event: rows\ndata: ["+string(shared[:len(shared)-1])+"]\n\nevent: progress\nid: 8\ndata: {\"frontier\":\"8\"}\n\n", batches)
	if !bytes.Equal(got, []byte(want)) {
		t.Errorf("the client read %d bytes, want the %d of the batches' rows and progress events", len(got), len(want))
	}
}

// threadWrites is the write system calls this thread has made (syscw of
// /proc/thread-self/io).
func threadWrites(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/thread-self/io")
	noErr(t, err)
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "syscw:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
			noErr(t, err)
			return n
		}
	}
	t.Fatal("/proc/thread-self/io has no syscw")
	return 0
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestUnsharedRunsOfOneBatch: two rows events of one batch whose rows no
// other stream has (the dataflow path's; a batch that spans two times)
// each reach the client, though both were encoded into the stream's one
// encoding buffer before the batch's write.
func TestUnsharedRunsOfOneBatch(t *testing.T) {
	server, client := net.Pipe()
	defer client.Close()
	opts := &formatter.Options{Relation: row.Schema{Columns: []row.Column{{Name: "a", Type: row.TypeText}}}}
	event := func(ts uint64, v string) []formatter.Row {
		var updates []row.Update
		for i := range 100 { // some 2 KiB: over connDirectWrite
			updates = append(updates, row.Update{Row: row.Row{fmt.Sprintf("%s%03d", v, i)}, Diff: 1})
		}
		return opts.Data(ts, updates)
	}
	s := &stream{h: &Handler{cfg: Config{}.withDefaults()}, conn: server, f: sseFraming{}, wire: newJSONWire(opts.Columns(), "", ',')}
	read := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(client)
		read <- b
	}()
	s.rows(s.wire, event(7, "AAAA"))
	s.rows(s.wire, event(8, "BBBB"))
	if !s.write() {
		t.Fatal("write failed")
	}
	server.Close()
	got := string(<-read)
	for _, v := range []string{"AAAA", "BBBB"} {
		if n := strings.Count(got, v); n != 100 {
			t.Errorf("%s: %d rows reached the client, want 100", v, n)
		}
	}
}
