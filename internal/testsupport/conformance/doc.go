// Package conformance is the SUBSCRIBE conformance suite: data-driven
// scripts under testdata/conformance/*.txt (at the repository root), each
// run against a fresh in-process server (internal/testsupport/testserver, in-memory
// storage) twice, once with the fast path on and once with it off, and
// both runs checked against the same expected output. A script is a
// reading of SUBSCRIBE-SPEC.md: its expectations are what the spec says,
// so a difference is a server bug or a difference between the paths.
//
//	go test ./internal/testsupport/conformance           # run every script on both paths
//	go test ./internal/testsupport/conformance -run 'TestConformance/cursors'
//	go test ./internal/testsupport/conformance -rewrite  # expectations := fast path's output
//
// After -rewrite, read the diff: the file then says what the server does,
// which is only right if it is what the spec says.
//
// # Script format
//
// In the spirit of cockroachdb/datadriven: a case is a directive line, its
// input (SQL, any number of lines), a "----" line, and the expected output
// up to the next blank line. An output with blank lines in it is written
// between "----\n----" and "----\n----". Lines starting with # between
// cases are comments. The first comment block is the header:
//
//	# known-failure   mismatches are logged, not failures
//	# tick: 20ms      turn the coordinator's tick on (default: off)
//	# compaction: 8   turn background compaction on (default: off)
//	# snapshot-chunk-rows: 3   rows per snapshot chunk (default 8192)
//	# part-target-bytes: 60    bytes per written part (default 8 MiB)
//
// With the tick off, a table's upper moves only when it is written (a
// write at T closes a batch at T+1), since stays at 0, and every progress
// row is deterministic. Scripts about since and RETAIN HISTORY, and about
// progress without data, turn the tick on.
//
//	exec [conn=NAME]
//	CREATE TABLE t (a int NOT NULL, b text)
//	----
//	CREATE TABLE
//
// Directives (conn defaults to "default"; a connection is opened on first
// use and kept by name; user=R and app=A apply when it opens):
//
//	exec      run SQL (simple protocol, one or more statements): rows,
//	          notices, the command tags, errors; with args=V1,V2 one
//	          statement in the extended protocol, with those values
//	query     the same without command tags; sort sorts the rows
//	fetch     exec for FETCH; binary uses the extended protocol with
//	          binary results (values decoded by type and printed as text)
//	fetch-until rows=N   repeat a FETCH until N data rows came; print only
//	          those (for tick scripts, where progress rows are untimed)
//	subscribe a bare SUBSCRIBE: read to completion (UP TO), or with rows=N
//	          read N rows, then cancel; extended / binary use the extended
//	          protocol, with args=V1,V2 as the text values of $1, $2
//	copy      COPY (SUBSCRIBE ...) TO STDOUT in text, csv or binary (the
//	          PGCOPY stream is decoded); rows=N as for subscribe
//	send      send SQL and return at once (no output)
//	recv      read what the pending statement sends: rows=N rows, or up to
//	          ReadyForQuery; notices=N stops after N notices (a SUBSCRIBE
//	          has started once its NOTICE came: wait for it before a
//	          cancel that must find it running)
//	cancel    send a CancelRequest for the pending statement (again every
//	          300 ms until it ends) and print how it ended; rows still
//	          streaming in are not printed; by=NAME cancels with
//	          SELECT pg_cancel_backend(pid) on connection NAME instead,
//	          each of which must answer t
//	connect   open a connection explicitly (user=, app=); params prints the
//	          ParameterStatus values the spec lists
//	disconnect close a connection without Terminate, as a dying client
//	now       print the latest complete time of the relation given as
//	          input (the AS OF a SUBSCRIBE without AS OF picks)
//
// Common arguments: cols prints the RowDescription (name:type per column,
// ":binary" for binary columns); params prints ParameterStatus messages;
// ordered compares rows in order; timeout=DUR bounds the case (default
// 10s); retry[=DUR] repeats the case until its output is the expected one
// (default 5s; for waiting on a since, never for statements with lasting
// effects); unnamed prints timestamps that are not placeholders yet as
// <T?> (a since in an error message); path=fast or path=dataflow runs the
// case on one path only, where the spec lets the paths differ.
//
// # Output
//
// Rows print as their text values separated by spaces, NULL as NULL and
// the empty string as "" (COPY text prints its fields raw, NULL as \N; csv
// prints the line). Errors print as "error SQLSTATE: message", with
// "(position N)" when the server gives one and "detail:"/"hint:" lines;
// notices as "SEVERITY SQLSTATE: message". A COPY prints "copy-out:
// FORMAT, N columns", binary COPY "PGCOPY header" and "PGCOPY trailer".
// Lines starting with "!!" are the runner's own findings (an invariant
// broken, a protocol surprise, a timeout); they never appear in a passing
// expectation.
//
// # Timestamps
//
// Timestamps are epoch milliseconds, so scripts never print them: every
// 13-digit number in the output becomes a placeholder <T0>, <T1>, ... in
// order of first appearance in the run, the same value always the same
// placeholder. Placeholders follow numeric order (<T3> < <T4>): a new value
// below an existing placeholder's is reported. A value within 2 of a
// placeholder prints relative to it, <T3+1> (the progress row after a
// write at <T3>), except in tick scripts. A subscribe row's mz_timestamp
// is named by what the row is, so that the name does not depend on how
// close the server's times are: a data row's time gets a placeholder of
// its own (two load-generator ticks 1 ms apart are <T3> and <T4>), and a
// progress row's is relative to the placeholder 1 or 2 below it when
// there is one (<T3+1>, even if <T4> is that same millisecond). In SQL, <T3>, <T3+1>, <T3-10>
// stand for values, and <pid:NAME> for a connection's backend process id:
//
//	subscribe conn=s
//	SUBSCRIBE t WITH (PROGRESS) AS OF <T0> UP TO <T1+1>
//
// The runner waits a few milliseconds after every exec, so that two
// statements never get timestamps within 2 of each other.
//
// # Multisets and invariants
//
// Materialize leaves the order of rows within a timestamp unspecified, so
// consecutive rows with the same mz_timestamp (and mz_progressed) are
// sorted before printing, unless the SUBSCRIBE (or the cursor's DECLARE)
// has WITHIN TIMESTAMP ORDER BY, or the case says ordered. Every subscribe
// stream, across the FETCHes of a cursor, is checked as it is read:
// timestamps never decrease, progress rows strictly advance, and no row is
// below a progress row already seen.
//
// # Writing a case
//
// Make the output independent of timing: read with exact FETCH counts and a
// TIMEOUT (FETCH n c WITH (TIMEOUT '5s') returns as soon as n rows came),
// end bare subscribes with UP TO or rows=N, cut groups of rows only in
// ordered subscribes, and name the timestamps of writes with now (or the
// rows of a running subscribe) before using them in AS OF. A case that
// fails because of a server bug goes to a script with a "# known-failure"
// header, with the expectation the spec gives, until the bug is fixed
// (regressions.txt holds the cases of bugs fixed since).
//
// TestResumeContract (resume_test.go) checks the resume contract with
// random writes and random kill points on both paths.
package conformance
