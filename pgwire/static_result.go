package pgwire

import (
	"context"
	"io"
)

// StaticResult is a Result whose messages are all known when it is made: the
// outcome of SET, BEGIN or an INSERT, a SHOW, a small SELECT. It sends
// Messages as one batch and completes with CommandTag.
type StaticResult struct {
	Desc       Description
	Messages   [][]byte // encoded messages: AppendDataRow, AppendNotice, AppendParameterStatus, ...
	CommandTag string
	sent       bool
}

// CommandResult returns a ResultCommand completing with tag after msgs
// (notices, parameter statuses).
func CommandResult(tag string, msgs ...[]byte) *StaticResult {
	return &StaticResult{Desc: Description{Kind: ResultCommand}, Messages: msgs, CommandTag: tag}
}

// EmptyResult returns the Result of an empty statement (EmptyQueryResponse).
func EmptyResult() *StaticResult {
	return &StaticResult{Desc: Description{Kind: ResultEmpty}}
}

// Describe implements Result.
func (r *StaticResult) Describe() Description { return r.Desc }

// Next implements Result: Messages, then io.EOF.
func (r *StaticResult) Next(ctx context.Context) ([][]byte, error) {
	if r.sent || len(r.Messages) == 0 {
		return nil, io.EOF
	}
	r.sent = true
	return r.Messages, nil
}

// Tag implements Result.
func (r *StaticResult) Tag() string { return r.CommandTag }

// Close implements Result.
func (r *StaticResult) Close() {}
