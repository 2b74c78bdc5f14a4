package redissink

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shardtail/shardtail/consumer"
)

// bulkConn is a connection of the Sink's own to Redis, dialed with the
// Client's options, that loads snapshot chunks: the RESP of a chunk's
// HSETs is written straight from its ops into one buffer, and the replies
// are read without a command object per key. Through go-redis, a pipeline
// of tens of thousands of HSETs cost the sink more CPU per key than Redis
// spent executing them (a Cmd, its argument slice and two boxed arguments
// per key, written and read back one by one).
//
// It speaks RESP2 (no HELLO) and is used by one goroutine at a time (the
// Sink's chunk load, which every other method waits for).
type bulkConn struct {
	conn net.Conn
	r    *bufio.Reader
	buf  []byte
}

// bulkTimeout bounds each exchange of a bulkConn when the context has no
// deadline: a chunk of 4 MiB takes Redis well under a second.
const bulkTimeout = time.Minute

// errBulkProtocol reports a reply a bulkConn did not expect.
var errBulkProtocol = errors.New("redissink: unexpected reply from redis")

// respError is an error reply of Redis. It is a redis.Error, as go-redis's
// are, so retry tells a server loading its AOF (LOADING) from a refusal.
type respError string

func (e respError) Error() string { return string(e) }

// RedisError marks respError as a redis.Error.
func (respError) RedisError() {}

var _ redis.Error = respError("")

// dialBulk connects to the Redis of opt, authenticates (a fixed password
// or a CredentialsProvider; Config.Validate refuses the streaming kind)
// and selects its database.
func dialBulk(ctx context.Context, opt *redis.Options) (*bulkConn, error) {
	dial := opt.Dialer
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	conn, err := dial(ctx, opt.Network, opt.Addr)
	if err != nil {
		return nil, fmt.Errorf("dial redis: %w", err)
	}
	c := &bulkConn{conn: conn, r: bufio.NewReaderSize(conn, 64<<10)}
	user, pass := opt.Username, opt.Password
	switch {
	case opt.CredentialsProviderContext != nil:
		if user, pass, err = opt.CredentialsProviderContext(ctx); err != nil {
			conn.Close()
			return nil, fmt.Errorf("redis credentials: %w", err)
		}
	case opt.CredentialsProvider != nil:
		user, pass = opt.CredentialsProvider()
	}
	var n int
	switch {
	case pass != "" && user != "":
		c.buf, n = appendCommand(c.buf, "AUTH", user, pass), n+1
	case pass != "":
		c.buf, n = appendCommand(c.buf, "AUTH", pass), n+1
	}
	if opt.DB != 0 {
		c.buf, n = appendCommand(c.buf, "SELECT", strconv.Itoa(opt.DB)), n+1
	}
	if n > 0 {
		err := c.exchange(ctx, func() error {
			for range n {
				if err := c.readStatus("OK"); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("redis handshake: %w", err)
		}
	}
	return c, nil
}

// Close closes the connection.
func (c *bulkConn) Close() error { return c.conn.Close() }

// exchange writes c.buf, empties it and runs read, within ctx's deadline
// (bulkTimeout if none); ctx's cancellation interrupts it.
func (c *bulkConn) exchange(ctx context.Context, read func() error) error {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(bulkTimeout)
	}
	if err := c.conn.SetDeadline(deadline); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) }) //nolint:errcheck // best effort: the exchange fails either way
	defer stop()
	_, err := c.conn.Write(c.buf)
	c.buf = c.buf[:0]
	if err == nil {
		err = read()
	}
	if err != nil && ctx.Err() != nil {
		return errors.Join(err, ctx.Err())
	}
	return err
}

// load writes ops as HSETs under prefix (a snapshot chunk of the generation
// loading claimed) in one MULTI/EXEC that WATCHes the checkpoint and the
// claim: nothing is written unless the checkpoint is expected and the claim
// is loading, from the check to the EXEC (consumer.ErrFenced otherwise).
// Two round trips: the check, then the transaction.
func (c *bulkConn) load(ctx context.Context, cpKey, loadingKey, expected, loading, prefix string, ops []op) error {
	c.buf = appendCommand(c.buf, "WATCH", cpKey, loadingKey)
	c.buf = appendCommand(c.buf, "MGET", cpKey, loadingKey)
	var cp, claim string
	err := c.exchange(ctx, func() error {
		if err := c.readStatus("OK"); err != nil {
			return err
		}
		vals, err := c.readBulkArray(2)
		cp, claim = vals[0], vals[1]
		return err
	})
	if err != nil {
		return err
	}
	if cp != expected || claim != loading {
		c.buf = appendCommand(c.buf, "UNWATCH")
		if err := c.exchange(ctx, func() error { return c.readStatus("OK") }); err != nil {
			return err
		}
		return fmt.Errorf("%w: checkpoint %q and loading %q, expected %q and %q",
			consumer.ErrFenced, cp, claim, expected, loading)
	}

	c.buf = appendCommand(c.buf, "MULTI")
	// A snapshot's one timestamp is one decimal for every key.
	var ts uint64
	var tsText []byte
	for i, o := range ops {
		if i == 0 || o.ts != ts {
			ts, tsText = o.ts, strconv.AppendUint(tsText[:0], o.ts, 10)
		}
		c.buf = append(c.buf, "*6\r\n$4\r\nHSET\r\n$"...)
		c.buf = strconv.AppendInt(c.buf, int64(len(prefix)+len(o.key)), 10)
		c.buf = append(c.buf, "\r\n"...)
		c.buf = append(append(c.buf, prefix...), o.key...)
		c.buf = append(c.buf, "\r\n$1\r\nv\r\n$"...)
		c.buf = appendBulkBody(c.buf, o.value)
		c.buf = append(c.buf, "$2\r\nts\r\n$"...)
		c.buf = appendBulkBody(c.buf, tsText)
	}
	c.buf = appendCommand(c.buf, "EXEC")
	return c.exchange(ctx, func() error {
		// MULTI's OK and each HSET's QUEUED; an error here (a command
		// refused while queued) makes EXEC fail with EXECABORT.
		var queueErr error
		for range len(ops) + 1 {
			if err := c.readStatus(""); err != nil {
				var re respError
				if !errors.As(err, &re) {
					return err
				}
				queueErr = firstErr(queueErr, err)
			}
		}
		n, err := c.readArrayLen()
		if err != nil {
			return firstErr(queueErr, err)
		}
		if n < 0 {
			return fmt.Errorf("%w: the checkpoint or the claim moved during a snapshot chunk", consumer.ErrFenced)
		}
		if n != len(ops) {
			return fmt.Errorf("%w: EXEC returned %d replies for %d commands", errBulkProtocol, n, len(ops))
		}
		var execErr error
		for range n {
			if _, err := c.readInt(); err != nil {
				var re respError
				if !errors.As(err, &re) {
					return err
				}
				execErr = firstErr(execErr, err)
			}
		}
		return execErr
	})
}

// firstErr returns the first of two errors that is not nil.
func firstErr(first, second error) error {
	if first != nil {
		return first
	}
	return second
}

// appendCommand appends a command of string arguments in RESP.
func appendCommand(buf []byte, args ...string) []byte {
	buf = append(buf, '*')
	buf = strconv.AppendInt(buf, int64(len(args)), 10)
	buf = append(buf, "\r\n"...)
	for _, a := range args {
		buf = append(buf, '$')
		buf = appendBulkBody(buf, []byte(a))
	}
	return buf
}

// appendBulkBody appends a bulk string after its '$': length, CRLF, bytes,
// CRLF.
func appendBulkBody(buf, b []byte) []byte {
	buf = strconv.AppendInt(buf, int64(len(b)), 10)
	buf = append(buf, "\r\n"...)
	buf = append(buf, b...)
	return append(buf, "\r\n"...)
}

// readLine reads one reply line without its CRLF; an error reply is
// returned as a respError.
func (c *bulkConn) readLine() ([]byte, error) {
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("%w: %q", errBulkProtocol, line)
	}
	line = line[:len(line)-2]
	if line[0] == '-' {
		return nil, respError(line[1:])
	}
	return line, nil
}

// readStatus reads a simple string reply, which must be want unless want
// is empty.
func (c *bulkConn) readStatus(want string) error {
	line, err := c.readLine()
	if err != nil {
		return err
	}
	if line[0] != '+' || want != "" && string(line[1:]) != want {
		return fmt.Errorf("%w: %q, want +%s", errBulkProtocol, line, want)
	}
	return nil
}

// readPrefixedInt reads a reply line of kind (':', '$', '*') and its
// integer.
func (c *bulkConn) readPrefixedInt(kind byte) (int64, error) {
	line, err := c.readLine()
	if err != nil {
		return 0, err
	}
	if line[0] != kind {
		return 0, fmt.Errorf("%w: %q, want %c", errBulkProtocol, line, kind)
	}
	n, err := strconv.ParseInt(string(line[1:]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %q", errBulkProtocol, line)
	}
	return n, nil
}

func (c *bulkConn) readInt() (int64, error) { return c.readPrefixedInt(':') }

// readArrayLen reads an array's header: its length, -1 for a nil array.
func (c *bulkConn) readArrayLen() (int, error) {
	n, err := c.readPrefixedInt('*')
	return int(n), err
}

// readBulkArray reads an array of n bulk strings ("" for nil ones).
func (c *bulkConn) readBulkArray(n int) ([]string, error) {
	vals := make([]string, n)
	got, err := c.readArrayLen()
	if err != nil {
		return vals, err
	}
	if got != n {
		return vals, fmt.Errorf("%w: an array of %d, want %d", errBulkProtocol, got, n)
	}
	for i := range vals {
		size, err := c.readPrefixedInt('$')
		if err != nil {
			return vals, err
		}
		if size < 0 {
			continue
		}
		b := make([]byte, size+2)
		if _, err := io.ReadFull(c.r, b); err != nil {
			return vals, err
		}
		vals[i] = string(b[:size])
	}
	return vals, nil
}
