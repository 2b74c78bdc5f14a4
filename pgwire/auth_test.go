package pgwire

import (
	"crypto/tls"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgproto3/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardtail/shardtail/internal/testsupport/testcert"
)

// authBackend has bob (password "secret") and trusty (no password).
func authBackend() *fakeBackend {
	b := newFakeBackend()
	b.roles = map[string]Role{
		"bob":    {PasswordRequired: true, Verifier: NewSCRAMVerifier("secret")},
		"trusty": {PasswordRequired: false},
		"broken": {PasswordRequired: true, Verifier: "md5abcdef"},
	}
	return b
}

func TestAuthentication(t *testing.T) {
	failed := func(user string) string { return `FATAL 28P01 password authentication failed for user "` + user + `"` }
	for _, tc := range []struct {
		method AuthMethod
		user   string // user or user:password
		want   string // "" for success, else "SEVERITY CODE message"
	}{
		{AuthSCRAM, "bob:secret", ""},
		{AuthSCRAM, "bob:wrong", failed("bob")},
		{AuthSCRAM, "bob", failed("bob")},
		{AuthSCRAM, "nobody:secret", failed("nobody")},
		{AuthSCRAM, "trusty", ""},
		{AuthSCRAM, "broken:md5abcdef", failed("broken")},
		{AuthCleartext, "bob:secret", ""},
		{AuthCleartext, "bob:wrong", failed("bob")},
		{AuthCleartext, "nobody:x", failed("nobody")},
		{AuthCleartext, "trusty", ""},
		{AuthTrust, "bob", ""},
		{AuthTrust, "nobody", `FATAL 28000 role "nobody" does not exist`},
	} {
		t.Run(tc.method.String()+"/"+strings.ReplaceAll(tc.user, ":", "_"), func(t *testing.T) {
			ts := startServer(t, authBackend(), Config{Auth: tc.method})
			conn, err := pgx.Connect(testContext(t), ts.url(tc.user, ""))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("connect: %v", err)
				}
				defer conn.Close(testContext(t))
				if got := collectInts(t, conn, pgx.QueryExecModeCacheStatement, "select 2"); len(got) != 2 {
					t.Errorf("select 2: %v", got)
				}
				return
			}
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) {
				t.Fatalf("connect: got %v, want %s", err, tc.want)
			}
			if got := pgErr.Severity + " " + pgErr.Code + " " + pgErr.Message; got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestSCRAMRFC7677 runs the exchange of RFC 7677 section 3 against the server
// side.
func TestSCRAMRFC7677(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	s := &scramServer{secret: newSCRAMSecret("pencil", salt, 4096)}
	serverFirst, err := s.clientFirst([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"), "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
	must(t, err)
	if want := "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"; serverFirst != want {
		t.Fatalf("server-first-message:\n got %s\nwant %s", serverFirst, want)
	}
	final, ok, err := s.clientFinal([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	must(t, err)
	if !ok || final != "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=" {
		t.Errorf("server-final-message: ok %v, %q", ok, final)
	}
	// A wrong proof fails without an error.
	_, ok, err = s.clientFinal([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=AHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	if ok || err != nil {
		t.Errorf("wrong proof: ok %v, err %v", ok, err)
	}
}

func TestSCRAMMalformed(t *testing.T) {
	secret := newSCRAMSecret("pw", []byte("0123456789abcdef"), 4096)
	for _, first := range []string{"", "x", "n", "n,", "p=tls-server-end-point,,n=,r=abc", "n,a=admin,n=,r=abc", "n,,m=ext,n=,r=abc", "n,,n=,", "n,,n=,r=", "n,,r=abc,n=x", "n,,n=,r=a b"} {
		s := &scramServer{secret: secret}
		if _, err := s.clientFirst([]byte(first), "srv"); err == nil {
			t.Errorf("client-first %q: no error", first)
		}
	}
	for _, final := range []string{"", "c=biws", "c=biws,r=cnsrv", "c=xxxx,r=cnsrv,p=AAAA", "c=biws,r=other,p=AAAA", "c=biws,r=cnsrv,p=!!", "c=biws,r=cnsrv,p=AAAA"} {
		s := &scramServer{secret: secret}
		if _, err := s.clientFirst([]byte("n,,n=,r=cn"), "srv"); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := s.clientFinal([]byte(final)); err == nil || ok {
			t.Errorf("client-final %q: ok %v, err %v", final, ok, err)
		}
	}
}

func TestSCRAMVerifier(t *testing.T) {
	v := NewSCRAMVerifier("correct horse")
	if !strings.HasPrefix(v, "SCRAM-SHA-256$4096:") {
		t.Fatalf("verifier %q", v)
	}
	s, err := parseSCRAMVerifier(v)
	must(t, err)
	if s.String() != v {
		t.Errorf("round trip: %q != %q", s.String(), v)
	}
	if !s.verifyPassword("correct horse") || s.verifyPassword("correct horse ") {
		t.Error("verifyPassword")
	}
	if NewSCRAMVerifier("correct horse") == v {
		t.Error("two verifiers of one password share a salt")
	}
	// A verifier made by Postgres 15 (CREATE ROLE x PASSWORD 'postgres'):
	// ours must accept the same password with it.
	pg := "SCRAM-SHA-256$4096:gh1FTZeBltVvzp0ZvQn0PA==$vwqEsYHzTfCYh7FBGMRoX0e3TtaWjTuSPo9JcQnzSO4=:cqC8f8oenE7Scjv2geFJSuo+74Eufjhl6BAulkqRw/k="
	if s, err := parseSCRAMVerifier(pg); err != nil || !s.verifyPassword("postgres") || s.verifyPassword("postgre") {
		t.Errorf("Postgres verifier: parse error %v, or the password check disagrees with Postgres", err)
	}
	for _, bad := range []string{"", "md5abc", "SCRAM-SHA-256$", "SCRAM-SHA-256$4096:c2FsdA==", "SCRAM-SHA-256$x:c2FsdA==$a:b",
		"SCRAM-SHA-256$0:c2FsdA==$" + strings.Repeat("A", 44) + ":" + strings.Repeat("A", 44),
		"SCRAM-SHA-256$4096:c2FsdA==$c2hvcnQ=:c2hvcnQ="} {
		if _, err := parseSCRAMVerifier(bad); err == nil {
			t.Errorf("parse %q: no error", bad)
		}
	}
}

// TestSASLGarbage sends malformed SASL messages; the server must answer
// 08P01 and stay up, also where pgproto3's decoder would panic.
func TestSASLGarbage(t *testing.T) {
	ts := startServer(t, authBackend(), Config{})
	for _, tc := range []struct {
		name string
		body []byte // body of the 'p' message after AuthenticationSASL
	}{
		{"Truncated", []byte("SCRAM-SHA-256\x00\x00")},
		{"NoMechanism", []byte("SCRAM")},
		{"WrongMechanism", []byte("PLAIN\x00\x00\x00\x00\x03abc")},
		{"BadClientFirst", []byte("SCRAM-SHA-256\x00\x00\x00\x00\x03abc")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ts.dialRawNoStartup(t)
			c.send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber, Parameters: map[string]string{"user": "bob"}})
			if _, ok := c.receive().(*pgproto3.AuthenticationSASL); !ok {
				t.Fatal("no AuthenticationSASL")
			}
			msg := append([]byte{'p'}, be32(4+len(tc.body))...)
			_, err := c.nc.Write(append(msg, tc.body...))
			must(t, err)
			expectFatal(t, c, "08P01")
		})
	}
}

func be32(n int) []byte { return []byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)} }

// expectFatal reads until an ErrorResponse, checks its code, then expects the
// server to close the connection.
func expectFatal(t *testing.T, c *rawClient, code string) {
	t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		msg, err := c.fe.Receive()
		if err != nil {
			t.Fatalf("connection ended (%v) without an ErrorResponse %s", err, code)
		}
		if e, ok := msg.(*pgproto3.ErrorResponse); ok {
			if e.Code != code || e.Severity != "FATAL" {
				t.Errorf("got %s %s %q, want FATAL %s", e.Severity, e.Code, e.Message, code)
			}
			break
		}
	}
	if _, err := c.fe.Receive(); err == nil {
		t.Error("connection still open after FATAL")
	}
}

func TestTLS(t *testing.T) {
	tlsConfig := selfSigned(t)
	ts := startServer(t, authBackend(), Config{TLSConfig: tlsConfig})
	for _, tc := range []struct {
		sslmode string
		wantTLS bool
	}{{"require", true}, {"prefer", true}, {"disable", false}} {
		t.Run(tc.sslmode, func(t *testing.T) {
			conn, err := pgx.Connect(testContext(t), strings.Replace(ts.url("bob:secret", ""), "sslmode=disable", "sslmode="+tc.sslmode, 1))
			must(t, err)
			defer conn.Close(testContext(t))
			_, isTLS := conn.PgConn().Conn().(*tls.Conn)
			if isTLS != tc.wantTLS {
				t.Errorf("TLS %v, want %v", isTLS, tc.wantTLS)
			}
			if got := collectInts(t, conn, pgx.QueryExecModeCacheStatement, "select 3"); len(got) != 3 {
				t.Errorf("select 3: %v", got)
			}
		})
	}

	t.Run("RequireWithoutServerTLS", func(t *testing.T) {
		plain := startServer(t, newFakeBackend(), Config{})
		_, err := pgx.Connect(testContext(t), strings.Replace(plain.url("alice", ""), "sslmode=disable", "sslmode=require", 1))
		if err == nil || !strings.Contains(err.Error(), "server refused TLS") {
			t.Errorf("got %v, want a TLS refusal", err)
		}
	})

	t.Run("GSSENCThenSSL", func(t *testing.T) {
		c := ts.dialRawNoStartup(t)
		_, err := c.nc.Write(append(be32(8), be32(gssEncRequestCode)...))
		must(t, err)
		reply := make([]byte, 1)
		if _, err := c.nc.Read(reply); err != nil || reply[0] != 'N' {
			t.Fatalf("GSSENCRequest: %q %v", reply, err)
		}
		_, err = c.nc.Write(append(be32(8), be32(sslRequestCode)...))
		must(t, err)
		if _, err := c.nc.Read(reply); err != nil || reply[0] != 'S' {
			t.Fatalf("SSLRequest: %q %v", reply, err)
		}
		tc := tls.Client(c.nc, &tls.Config{InsecureSkipVerify: true})
		must(t, tc.Handshake())
		tc.Close()
	})
}

// selfSigned returns a server config with a fresh self-signed certificate
// for 127.0.0.1 (clients here skip verification).
func selfSigned(t *testing.T) *tls.Config {
	t.Helper()
	cfg, _ := testcert.SelfSigned(t)
	return cfg
}
