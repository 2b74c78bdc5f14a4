package pgwire

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/text/secure/precis"
)

// SCRAM-SHA-256 (RFC 5802, RFC 7677) as Postgres speaks it: the server side of
// the exchange and the verifier format of pg_authid.rolpassword. Channel
// binding (SCRAM-SHA-256-PLUS) is not offered, so a client's "y" flag (it
// could bind, but thinks we cannot) is accepted as honest.

const (
	scramMechanism = "SCRAM-SHA-256"

	// scramIterations is Postgres's default scram_iterations.
	scramIterations = 4096
	scramSaltLen    = 16
	// scramNonceLen is Postgres's SCRAM_RAW_NONCE_LEN.
	scramNonceLen = 18
	// scramMaxIterations bounds a verifier's iteration count, so that a
	// corrupt catalog entry cannot make one login burn minutes of CPU.
	scramMaxIterations = 1 << 22
)

// errSCRAMMalformed is the family of malformed SCRAM messages from a client.
var errSCRAMMalformed = protocolErrorf("malformed SCRAM message")

// NewSCRAMVerifier returns the SCRAM-SHA-256 verifier of password in
// Postgres's format, "SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>",
// with a random salt and 4096 iterations. Store it for CREATE ROLE ...
// PASSWORD and return it in Role.Verifier.
func NewSCRAMVerifier(password string) string {
	salt := make([]byte, scramSaltLen)
	rand.Read(salt) // never fails (crypto/rand.Read panics rather than return an error)
	return newSCRAMSecret(password, salt, scramIterations).String()
}

// scramSecret is a parsed verifier.
type scramSecret struct {
	iterations int
	salt       []byte
	storedKey  []byte // H(ClientKey)
	serverKey  []byte
}

// newSCRAMSecret derives the secret of password.
func newSCRAMSecret(password string, salt []byte, iterations int) scramSecret {
	salted := saltedPassword(password, salt, iterations)
	clientKey := hmacSHA256(salted, "Client Key")
	stored := sha256.Sum256(clientKey)
	return scramSecret{
		iterations: iterations,
		salt:       salt,
		storedKey:  stored[:],
		serverKey:  hmacSHA256(salted, "Server Key"),
	}
}

// String formats the secret as Postgres stores it.
func (s scramSecret) String() string {
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("%s$%d:%s$%s:%s", scramMechanism, s.iterations, b64(s.salt), b64(s.storedKey), b64(s.serverKey))
}

// parseSCRAMVerifier parses a verifier made by NewSCRAMVerifier (or by
// Postgres).
func parseSCRAMVerifier(v string) (scramSecret, error) {
	bad := func(why string) (scramSecret, error) {
		return scramSecret{}, fmt.Errorf("parse SCRAM verifier: %s", why)
	}
	rest, ok := strings.CutPrefix(v, scramMechanism+"$")
	if !ok {
		return bad("not a SCRAM-SHA-256 verifier")
	}
	iterSalt, keys, ok := strings.Cut(rest, "$")
	if !ok {
		return bad("missing keys")
	}
	iterText, saltText, ok := strings.Cut(iterSalt, ":")
	if !ok {
		return bad("missing salt")
	}
	storedText, serverText, ok := strings.Cut(keys, ":")
	if !ok {
		return bad("missing server key")
	}
	iterations, err := strconv.Atoi(iterText)
	if err != nil || iterations < 1 || iterations > scramMaxIterations {
		return bad("invalid iteration count")
	}
	var s scramSecret
	s.iterations = iterations
	dec := base64.StdEncoding.DecodeString
	if s.salt, err = dec(saltText); err != nil || len(s.salt) == 0 {
		return bad("invalid salt")
	}
	if s.storedKey, err = dec(storedText); err != nil || len(s.storedKey) != sha256.Size {
		return bad("invalid stored key")
	}
	if s.serverKey, err = dec(serverText); err != nil || len(s.serverKey) != sha256.Size {
		return bad("invalid server key")
	}
	return s, nil
}

// VerifyPassword reports whether a cleartext password matches a verifier
// made by NewSCRAMVerifier (or PostgreSQL): how a transport that receives
// passwords in clear (the HTTP feed's Basic auth, over TLS) checks them
// against the roles' verifiers, as AuthCleartext does. An unusable
// verifier matches no password; an empty password matches none either
// (PostgreSQL's "empty password returned by client").
func VerifyPassword(verifier, password string) bool {
	secret, err := parseSCRAMVerifier(verifier)
	return err == nil && password != "" && secret.verifyPassword(password)
}

// verifyPassword reports whether a cleartext password matches the secret.
func (s scramSecret) verifyPassword(password string) bool {
	clientKey := hmacSHA256(saltedPassword(password, s.salt, s.iterations), "Client Key")
	stored := sha256.Sum256(clientKey)
	return subtle.ConstantTimeCompare(stored[:], s.storedKey) == 1
}

// saltedPassword is Hi(Normalize(password), salt, i) of RFC 5802.
func saltedPassword(password string, salt []byte, iterations int) []byte {
	key, err := pbkdf2.Key(sha256.New, normalizePassword(password), salt, iterations, sha256.Size)
	if err != nil {
		// Only FIPS-140 mode rejects parameters, and ours are always allowed.
		panic(fmt.Sprintf("pgwire: pbkdf2: %v", err))
	}
	return key
}

// normalizePassword approximates SASLprep (RFC 4013) with its successor PRECIS
// OpaqueString, as pgx does. Like Postgres, a password that does not normalize
// is used as is.
func normalizePassword(password string) string {
	n, err := precis.OpaqueString.String(password)
	if err != nil {
		return password
	}
	return n
}

func hmacSHA256(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// scramServer is the server side of one SCRAM-SHA-256 exchange.
type scramServer struct {
	secret scramSecret

	gs2Header       string // "n,," or "y,,", as the client sent it
	clientFirstBare string
	serverFirst     string
	nonce           string // client nonce + server nonce
}

// clientFirst handles the client-first-message and returns the
// server-first-message. serverNonce is the server's part of the nonce.
func (s *scramServer) clientFirst(msg []byte, serverNonce string) (string, error) {
	m := string(msg)
	switch {
	case strings.HasPrefix(m, "n,"), strings.HasPrefix(m, "y,"):
		m = m[2:]
	case strings.HasPrefix(m, "p="):
		return "", protocolErrorf("malformed SCRAM message: channel binding was requested, but the server did not offer SCRAM-SHA-256-PLUS")
	default:
		return "", errSCRAMMalformed.WithDetail("Unexpected channel-binding flag.")
	}
	if strings.HasPrefix(m, "a=") {
		return "", Errorf("0A000", "client uses authorization identity, but it is not supported")
	}
	if !strings.HasPrefix(m, ",") {
		return "", errSCRAMMalformed.WithDetail("Comma expected after the GS2 header.")
	}
	m = m[1:]
	s.gs2Header = string(msg[:len(msg)-len(m)])
	s.clientFirstBare = m
	if strings.HasPrefix(m, "m=") {
		return "", Errorf("0A000", "client requires an unsupported SCRAM extension")
	}
	// n=<user>,r=<nonce>[,<extensions>]. Postgres ignores the user name here
	// (it has the startup packet's), and so do we.
	attrs := strings.Split(m, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") {
		return "", errSCRAMMalformed.WithDetail("Expected attributes \"n\" and \"r\".")
	}
	clientNonce := attrs[1][2:]
	if clientNonce == "" || !printable(clientNonce) {
		return "", errSCRAMMalformed.WithDetail("Invalid client nonce.")
	}
	s.nonce = clientNonce + serverNonce
	s.serverFirst = fmt.Sprintf("r=%s,s=%s,i=%d", s.nonce, base64.StdEncoding.EncodeToString(s.secret.salt), s.secret.iterations)
	return s.serverFirst, nil
}

// clientFinal handles the client-final-message. It returns the
// server-final-message and whether the client proved it knows the password.
func (s *scramServer) clientFinal(msg []byte) (serverFinal string, ok bool, err error) {
	m := string(msg)
	i := strings.LastIndex(m, ",p=")
	if i < 0 {
		return "", false, errSCRAMMalformed.WithDetail("Expected attribute \"p\".")
	}
	withoutProof, proofText := m[:i], m[i+3:]
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "c=") || !strings.HasPrefix(attrs[1], "r=") {
		return "", false, errSCRAMMalformed.WithDetail("Expected attributes \"c\" and \"r\".")
	}
	binding, err := base64.StdEncoding.DecodeString(attrs[0][2:])
	if err != nil || string(binding) != s.gs2Header {
		return "", false, errSCRAMMalformed.WithDetail("Channel binding data does not match the GS2 header.")
	}
	if attrs[1][2:] != s.nonce {
		return "", false, errSCRAMMalformed.WithDetail("Nonce does not match.")
	}
	proof, err := base64.StdEncoding.DecodeString(proofText)
	if err != nil || len(proof) != sha256.Size {
		return "", false, errSCRAMMalformed.WithDetail("Malformed proof.")
	}

	authMessage := s.clientFirstBare + "," + s.serverFirst + "," + withoutProof
	clientSignature := hmacSHA256(s.secret.storedKey, authMessage)
	clientKey := make([]byte, sha256.Size)
	for i := range clientKey {
		clientKey[i] = proof[i] ^ clientSignature[i]
	}
	stored := sha256.Sum256(clientKey)
	if subtle.ConstantTimeCompare(stored[:], s.secret.storedKey) != 1 {
		return "", false, nil
	}
	serverSignature := hmacSHA256(s.secret.serverKey, authMessage)
	return "v=" + base64.StdEncoding.EncodeToString(serverSignature), true, nil
}

// printable reports whether s has only printable ASCII characters other than
// ',', the alphabet of a SCRAM nonce.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == ',' {
			return false
		}
	}
	return true
}

// newServerNonce returns a random nonce for server-first-message.
func newServerNonce() string {
	b := make([]byte, scramNonceLen)
	rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// errNoVerifier is logged when a role needs a password but has no usable
// verifier; the client only sees the usual authentication failure.
var errNoVerifier = errors.New("role requires a password but has no valid SCRAM verifier")
