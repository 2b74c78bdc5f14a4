// Package deploytest runs shardtail as its users deploy it: separate
// server processes built from cmd/shardtail, sharing an S3-compatible blob
// store over HTTP and a PostgreSQL consensus, with real clients. It holds
// tests only.
package deploytest
