//go:build race

package pgwire

// raceEnabled reports a build with the race detector.
const raceEnabled = true
