package sockopt

import "errors"

// errNotTCP: the connection is not a TCP one (or a TLS one over TCP).
var errNotTCP = errors.New("sockopt: not a TCP connection")
