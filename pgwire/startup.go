package pgwire

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgproto3/v2"
)

// Startup packet codes (the int32 after the length).
const (
	protocolVersion3  = 3 << 16 // 3.0; 3.x is negotiated down to 3.0
	cancelRequestCode = 80877102
	sslRequestCode    = 80877103
	gssEncRequestCode = 80877104
)

// errSilent marks an error after which nothing more can be sent (a failed TLS
// handshake, a timed-out or dead socket): the connection is just closed.
type errSilent struct{ error }

func (e errSilent) Unwrap() error { return e.error }

// startup runs the startup phase: SSL and GSS negotiation, then the
// StartupMessage, whose parameters it returns. A CancelRequest is handled here
// and returns nil parameters. Startup packets are read straight from the
// socket, with no read-ahead, so that no plaintext byte sent after an
// SSLRequest can be mistaken for data inside the TLS session.
func (c *conn) startup() (map[string]string, error) {
	sslDone := false
	for {
		code, body, err := readStartupPacket(c.nc)
		if err != nil {
			return nil, err
		}
		switch {
		case code == sslRequestCode:
			if sslDone || len(body) != 0 {
				return nil, protocolErrorf("unexpected SSL negotiation request")
			}
			sslDone = true
			if c.srv.cfg.TLSConfig == nil {
				if _, err := c.nc.Write([]byte{'N'}); err != nil {
					return nil, errSilent{err}
				}
				continue
			}
			if _, err := c.nc.Write([]byte{'S'}); err != nil {
				return nil, errSilent{err}
			}
			tc := tls.Server(c.nc, c.srv.cfg.TLSConfig)
			if err := tc.HandshakeContext(c.ctx); err != nil {
				return nil, errSilent{fmt.Errorf("tls handshake: %w", err)}
			}
			c.nc, c.tls = tc, true
			c.src.r = tc
		case code == gssEncRequestCode:
			// No GSSAPI encryption: 'N', and the client goes on with an
			// SSLRequest or a StartupMessage.
			if len(body) != 0 {
				return nil, protocolErrorf("unexpected GSSAPI negotiation request")
			}
			if _, err := c.nc.Write([]byte{'N'}); err != nil {
				return nil, errSilent{err}
			}
		case code == cancelRequestCode:
			if len(body) != 8 {
				return nil, protocolErrorf("invalid length of cancel request packet")
			}
			c.srv.cancelRequest(binary.BigEndian.Uint32(body), binary.BigEndian.Uint32(body[4:]))
			return nil, nil
		case code>>16 == 3:
			params, err := parseStartupParams(body)
			if err != nil {
				return nil, err
			}
			c.negotiateVersion(code, params)
			return params, nil
		default:
			return nil, Errorf("0A000", "unsupported frontend protocol %d.%d: server supports 3.0 to 3.0", code>>16, code&0xffff)
		}
	}
}

// readStartupPacket reads one length-prefixed startup packet and returns its
// code and the bytes after it.
func readStartupPacket(r io.Reader) (code uint32, body []byte, err error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, errSilent{err}
	}
	n := int64(int32(binary.BigEndian.Uint32(hdr[:])))
	if n < 8 || n > MaxStartupMessageSize {
		return 0, nil, protocolErrorf("invalid length of startup packet: %d", n)
	}
	buf := make([]byte, n-4)
	if _, err := io.ReadFull(r, buf); err != nil {
		return 0, nil, errSilent{err}
	}
	return binary.BigEndian.Uint32(buf), buf[4:], nil
}

// parseStartupParams decodes the name/value pairs of a StartupMessage.
func parseStartupParams(b []byte) (map[string]string, error) {
	params := make(map[string]string)
	for {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			return nil, protocolErrorf("invalid startup packet layout: expected terminator as last byte")
		}
		if i == 0 {
			if len(b) != 1 {
				return nil, protocolErrorf("invalid startup packet layout: expected terminator as last byte")
			}
			return params, nil
		}
		name := string(b[:i])
		b = b[i+1:]
		j := bytes.IndexByte(b, 0)
		if j < 0 {
			return nil, protocolErrorf("invalid startup packet layout: expected terminator as last byte")
		}
		value := string(b[:j])
		b = b[j+1:]
		// The session's encoding is UTF-8 from the first byte: a name or
		// value that is not would be echoed in ParameterStatus to the
		// client, shown to others (pg_stat_activity, the statement log)
		// and refused where it is stored, long after this connection.
		if !utf8.ValidString(name) || !utf8.ValidString(value) {
			return nil, Errorf("22021", "invalid byte sequence for encoding \"UTF8\" in startup parameter %q", name)
		}
		params[name] = value
	}
}

// negotiateVersion answers a StartupMessage for protocol 3.x with x > 0, or
// with protocol options ("_pq_.*"), with NegotiateProtocolVersion: we speak
// 3.0 and know no option. It removes the options from params.
func (c *conn) negotiateVersion(code uint32, params map[string]string) {
	var unknown []string
	for name := range params {
		if strings.HasPrefix(name, "_pq_.") {
			unknown = append(unknown, name)
			delete(params, name)
		}
	}
	if code == protocolVersion3 && len(unknown) == 0 {
		return
	}
	slices.Sort(unknown)
	size := 4 + 4 + 4
	for _, u := range unknown {
		size += len(u) + 1
	}
	msg := []byte{'v'}
	msg = binary.BigEndian.AppendUint32(msg, uint32(size))
	msg = binary.BigEndian.AppendUint32(msg, protocolVersion3) // newest minor version we support: 3.0
	msg = binary.BigEndian.AppendUint32(msg, uint32(len(unknown)))
	for _, u := range unknown {
		msg = append(msg, u...)
		msg = append(msg, 0)
	}
	c.sendRaw(msg)
}

// defaultParameters are the ParameterStatus values reported at startup unless
// the session overrides them. The server version is the one Materialize
// reports: new enough that clients use the modern protocol paths, old enough
// that they do not expect catalog features a Postgres 9.5 lacked.
func defaultParameters(appName string) map[string]string {
	return map[string]string{
		"server_version":              "9.5.0",
		"server_encoding":             "UTF8",
		"client_encoding":             "UTF8",
		"DateStyle":                   "ISO, MDY",
		"TimeZone":                    "UTC",
		"IntervalStyle":               "postgres",
		"integer_datetimes":           "on",
		"standard_conforming_strings": "on",
		"application_name":            appName,
	}
}

// openSession finishes the startup after authentication: AuthenticationOk,
// the session, ParameterStatus, BackendKeyData and the first ReadyForQuery.
func (c *conn) openSession(params map[string]string) error {
	c.send(&pgproto3.AuthenticationOk{})
	c.srv.register(c)
	c.logPID = true

	info := ConnInfo{
		User:       params["user"],
		Database:   params["database"],
		Options:    make(map[string]string, len(params)),
		RemoteAddr: c.nc.RemoteAddr(),
		TLS:        c.tls,
		ProcessID:  c.pid,
		Password:   c.password,
	}
	for k, v := range params {
		if k != "user" && k != "database" {
			info.Options[k] = v
		}
	}
	sess, err := c.srv.backend.OpenSession(c.ctx, info)
	if err != nil {
		return err
	}
	if sess == nil {
		return fmt.Errorf("backend returned a nil session")
	}
	c.sess = sess

	status := defaultParameters(params["application_name"])
	maps.Copy(status, sess.Parameters())
	for _, name := range slices.Sorted(maps.Keys(status)) {
		c.send(&pgproto3.ParameterStatus{Name: name, Value: status[name]})
	}
	c.send(&pgproto3.BackendKeyData{ProcessID: c.pid, SecretKey: c.secret})
	c.readyForQuery()
	return c.werr
}
