package pgwire

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgproto3/v2"
)

// authenticate runs the authentication exchange for user, which must end
// by deadline. It returns nil when the user may log in, and otherwise the
// error to send (FATAL).
func (c *conn) authenticate(user string, deadline time.Time) error {
	if user == "" {
		return Errorf("28000", "no PostgreSQL user name specified in startup packet")
	}
	role, err := c.srv.backend.Role(c.ctx, user)
	unknown := errors.Is(err, ErrUnknownRole)
	if err != nil && !unknown {
		return err
	}
	method := c.srv.cfg.Auth
	if method == AuthTrust || (!unknown && !role.PasswordRequired) {
		if unknown {
			return Errorf("28000", "role \"%s\" does not exist", user)
		}
		return nil
	}

	// For an unknown role, or one without a usable verifier, the exchange
	// still runs against a fake secret, and fails like a wrong password:
	// the client learns nothing about which roles exist.
	secret, verr := parseSCRAMVerifier(role.Verifier)
	if unknown || verr != nil {
		if !unknown {
			c.logger().Warn("pgwire: authentication failed", "user", user, "err", fmt.Errorf("%w: %v", errNoVerifier, verr))
		}
		secret = c.srv.mockSecret(user)
	}

	ok, err := c.throttled(deadline, func() (bool, error) {
		exchange := c.authSCRAM
		if method == AuthCleartext {
			exchange = c.authCleartext
		}
		ok, err := exchange(secret)
		return ok && !unknown && verr == nil, err
	})
	if err != nil {
		return err
	}
	if !ok {
		return authFailed(user)
	}
	return nil
}

// throttled runs the password exchange under the throttle of the client's
// address: it first waits as long as the throttle says, then reports the
// outcome. An exchange that ends in an error (the client left or broke the
// protocol) learnt nothing and is not a failure.
func (c *conn) throttled(deadline time.Time, exchange func() (bool, error)) (bool, error) {
	end, err := c.srv.throttle.Attempt(c.ctx, throttleKey(c.raw.RemoteAddr()), deadline)
	if err != nil {
		return false, err
	}
	ok, err := exchange()
	end(err == nil && !ok)
	return ok, err
}

// authCleartext asks for the password in clear text and checks it.
func (c *conn) authCleartext(secret scramSecret) (bool, error) {
	c.send(&pgproto3.AuthenticationCleartextPassword{})
	if err := c.flush(); err != nil {
		return false, errSilent{err}
	}
	if err := c.be.SetAuthType(pgproto3.AuthTypeCleartextPassword); err != nil {
		return false, err
	}
	msg, err := c.receive()
	if err != nil {
		return false, err
	}
	pm, ok := msg.(*pgproto3.PasswordMessage)
	if !ok {
		return false, protocolErrorf("expected password response, got message type %q", frontendType(msg))
	}
	if pm.Password == "" {
		return false, nil // Postgres: "empty password returned by client"
	}
	if !secret.verifyPassword(pm.Password) {
		return false, nil
	}
	c.password = pm.Password
	return true, nil
}

// authSCRAM runs a SCRAM-SHA-256 exchange.
func (c *conn) authSCRAM(secret scramSecret) (bool, error) {
	c.send(&pgproto3.AuthenticationSASL{AuthMechanisms: []string{scramMechanism}})
	if err := c.flush(); err != nil {
		return false, errSilent{err}
	}
	if err := c.be.SetAuthType(pgproto3.AuthTypeSASL); err != nil {
		return false, err
	}
	msg, err := c.receive()
	if err != nil {
		return false, err
	}
	initial, ok := msg.(*pgproto3.SASLInitialResponse)
	if !ok {
		return false, protocolErrorf("expected SASL response, got message type %q", frontendType(msg))
	}
	if initial.AuthMechanism != scramMechanism {
		return false, protocolErrorf("client selected an invalid SASL authentication mechanism")
	}
	s := &scramServer{secret: secret}
	serverFirst, err := s.clientFirst(initial.Data, newServerNonce())
	if err != nil {
		return false, err
	}
	c.send(&pgproto3.AuthenticationSASLContinue{Data: []byte(serverFirst)})
	if err := c.flush(); err != nil {
		return false, errSilent{err}
	}
	if err := c.be.SetAuthType(pgproto3.AuthTypeSASLContinue); err != nil {
		return false, err
	}
	if msg, err = c.receive(); err != nil {
		return false, err
	}
	final, ok := msg.(*pgproto3.SASLResponse)
	if !ok {
		return false, protocolErrorf("expected SASL response, got message type %q", frontendType(msg))
	}
	serverFinal, ok, err := s.clientFinal(final.Data)
	if err != nil || !ok {
		return false, err
	}
	c.send(&pgproto3.AuthenticationSASLFinal{Data: []byte(serverFinal)})
	return true, nil
}

// mockSecret returns the fake secret used for an unknown role: a salt that
// is stable per user name (a real role's salt does not change between
// attempts either) and keys no password matches.
func (s *Server) mockSecret(user string) scramSecret {
	salt := hmac.New(sha256.New, s.mockSalt)
	salt.Write([]byte(user))
	keys := hmac.New(sha256.New, s.mockSalt)
	keys.Write([]byte("keys:" + user))
	k := keys.Sum(nil)
	return scramSecret{
		iterations: scramIterations,
		salt:       salt.Sum(nil)[:scramSaltLen],
		storedKey:  k,
		serverKey:  k,
	}
}
