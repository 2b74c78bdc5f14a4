//go:build race

package adapter_test

// raceEnabled reports a build with the race detector.
const raceEnabled = true
