package sqlite

import (
	"database/sql/driver"
	"errors"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// determinate reports whether a write that failed with err certainly did
// not commit. The reasoning is in "Errors" in doc.go; in short, these are
// the result codes SQLite raises before it writes a commit frame, and
// anything else (I/O errors above all) may have committed.
func determinate(err error) bool {
	if errors.Is(err, driver.ErrBadConn) {
		// database/sql's contract: a driver returns ErrBadConn only when
		// it did nothing.
		return true
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff { // the primary code of an extended one
	case sqlite3.SQLITE_BUSY, // could not take the write lock in BusyTimeout
		sqlite3.SQLITE_LOCKED,     // conflict inside this connection
		sqlite3.SQLITE_CONSTRAINT, // the statement was aborted
		sqlite3.SQLITE_ERROR,      // SQL error: failed to prepare or run
		sqlite3.SQLITE_READONLY,   // refused to write
		sqlite3.SQLITE_CANTOPEN,   // never reached the file
		sqlite3.SQLITE_TOOBIG,     // refused the value
		sqlite3.SQLITE_MISMATCH,
		sqlite3.SQLITE_RANGE,
		sqlite3.SQLITE_INTERRUPT: // interrupted statements roll back
		return true
	}
	return false
}

// isDuplicate reports whether err is a primary key violation: a version
// with that (shard, sequence_number) exists.
func isDuplicate(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}
