//go:build race

package tail

// raceEnabled reports a build with the race detector.
const raceEnabled = true
