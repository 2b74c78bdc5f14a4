// Package validate holds the argument checks that every Consensus backend
// makes before touching its store, so that the in-memory backend rejects
// exactly what the SQL backends must reject (a SeqNo that does not fit a
// signed 64-bit column, a CompareAndSet that would not advance the log) and
// a test against mem says something about production.
//
// A failed check is a determinate error: nothing was attempted.
package validate
