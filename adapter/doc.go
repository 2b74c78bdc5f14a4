// Package adapter is the server's SQL front: sessions, planning, statement
// sequencing, routing between the two SUBSCRIBE paths, and the system
// relations (mz_internal.mz_subscriptions and the like). pgwire calls it
// through pgwire.Backend (the Coordinator) and pgwire.Session (a Session);
// everything below it — persist, the catalog and timestamp oracle, table
// writers, the fast path, the dataflow path — is reached from here.
//
// # A statement's way through
//
//  1. parse: Session.Query (simple protocol) or Session.Prepare (extended)
//     parses the text with package sql.
//  2. route: in a tail process (Config.Upstream set), route decides where
//     each statement runs: fast-path SUBSCRIBEs and their cursors here,
//     transaction control and SET on both sides, everything else proxied
//     upstream on the same client session.
//  3. plan: Session.plan resolves names against the catalog and returns a
//     plan: the fields Describe reports and an exec function. Planning does
//     no work; a SUBSCRIBE's plan (subscribePlan) fixes its output shape.
//  4. sequence: exec runs the statement with the transaction rules
//     (implicit transactions, blocks, a SUBSCRIBE as the only read of its
//     block), taking timestamps from the oracle and, for SUBSCRIBE, choosing
//     AS OF and UP TO. A block's or multi-statement query's writes wait
//     for COMMIT; unlike Materialize's insert-only transactions, they may
//     UPDATE and DELETE, which read a table with the transaction's own
//     earlier writes (Session.modifyInTx), and COMMIT fails with 40001 if
//     another commit wrote a table they read since the first read. Every
//     write (INSERT's VALUES and SELECT, UPDATE's SET, COPY FROM) stores a
//     column's value through columnAssign, which applies the column's type
//     modifier (expr.ColumnAssign), before NOT NULL is checked and before
//     anything is written: a bad row fails the whole statement.
//  5. Result: exec returns a pgwire.Result, which pgwire pulls until io.EOF.
//
// # Where a subscribe leaves the coordinator
//
// subscribePlan.start chooses the timestamps, then the path with
// takesFastPath (the one eligibility rule, which routing applies too): with
// the flag on, a table, source or materialized view, bare or through a
// map/filter/project (a query or view over one, nested), goes to the
// Coordinator's tail.Manager, the MFP bound to the statement's parameters
// as the request's subscribe.Shape (mfp.shape: a canonical key, and the
// leading equality the tail routes rows by); a query that reads no
// collection or now() starts a dataflow.Subscribe, as everything does with
// the flag off.
// Both take one subscribe.Request and return a subscribe.Subscription,
// registered for mz_internal.mz_subscriptions. From then on the coordinator
// is off the data path: the session's goroutine pulls rows from the
// subscription while it streams the Result (bare SUBSCRIBE, COPY) or
// executes FETCH on a cursor, and encodes them there (formatter). Closing
// the Result, the cursor or the session closes the subscription.
//
// # Statement log
//
// Session.execute (stmtlog.go) is the one place a statement's record
// begins and ends, for both protocols and, in a tail process, for the
// statements it runs itself (the upstream logs what it proxies). The
// record ends when pgwire closes the statement's Result, except that a
// subscription holds it open until it ends: trackedSubscription records
// the path, AS OF, delivered frontier, detaches and resumes, and the end
// reason (subscribe.EndReason, or a cancel or disconnect seen in its
// context); a cursor's DECLARE hands its record to the cursor. The records
// go to package stmtlog, which appends them off the statement path, and
// are read back as mz_internal.mz_statement_execution_history and
// mz_recent_activity_log (a non-superuser sees only its own statements).
//
// # Errors
//
// Client-visible errors are *Error values with a SQLSTATE (errors.go);
// mapPersistErr turns storage and subscription errors into them (a dropped
// relation 42704, a client too far behind 53200).
package adapter
