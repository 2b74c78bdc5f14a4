// Command shardtail is the change-feed server and its tools. See README.md.
//
//	shardtail serve      the server (role all, or a tail process with --upstream)
//	shardtail storm      N clients subscribing at once (a reconnect storm)
//	shardtail bench      the A/B benchmark suite and its report
//	shardtail sink       land collections in a target (PostgreSQL, …)
//	shardtail version    print the version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Version is the shardtail version, reported as mz_version.
const Version = "0.1.0"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(exitCode(NewMain(os.Stdout, os.Stderr).Run(ctx, os.Args[1:]), os.Stderr))
}

// exitCode is the process's exit status for Run's error, which it reports
// on stderr: 0 for success and for a help request (the usage is already
// printed), 1 for any other error.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	default:
		fmt.Fprintln(stderr, "shardtail:", err)
		return 1
	}
}

// errNoCommand is Run's error when no subcommand is named.
var errNoCommand = errors.New("no command given")

// Main dispatches subcommands.
type Main struct {
	Stdout, Stderr io.Writer
}

// NewMain returns a Main writing to the given streams.
func NewMain(stdout, stderr io.Writer) *Main { return &Main{Stdout: stdout, Stderr: stderr} }

const usage = `shardtail: live query results over the Postgres wire protocol

Usage:
  shardtail serve [flags]     run the server (see: shardtail serve -h)
  shardtail storm [flags]     N clients subscribing at once (see: shardtail storm -h)
  shardtail bench [flags]     run the A/B benchmark suite, write the report (see: shardtail bench -h)
  shardtail sink KIND [flags] land collections in a target (see: shardtail sink --help)
  shardtail version           print the version

Example:
  shardtail serve --data-dir ./shardtail-data
  psql -h 127.0.0.1 -p 6875 -U materialize materialize
`

// Run runs the subcommand named by args[0].
func (m *Main) Run(ctx context.Context, args []string) error {
	slog.SetDefault(slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if len(args) == 0 {
		fmt.Fprint(m.Stderr, usage)
		return errNoCommand
	}
	switch args[0] {
	case "serve":
		return m.serve(ctx, args[1:])
	case "storm":
		return m.storm(ctx, args[1:])
	case "bench":
		return m.bench(ctx, args[1:])
	case "sink":
		return m.sink(ctx, args[1:])
	case "version", "-version", "--version":
		fmt.Fprintln(m.Stdout, "shardtail", Version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(m.Stdout, usage)
		return nil
	default:
		fmt.Fprint(m.Stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}

// envDefaults sets every flag not given on the command line from its
// environment variable SHARDTAIL_<NAME> (dashes as underscores).
func envDefaults(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		name := "SHARDTAIL_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("%s=%q: %w", name, v, e)
			}
		}
	})
	return err
}
