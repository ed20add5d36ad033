//go:build race

package redshard_test

// hotRace reports whether the race detector is on (it slows the load
// tests down about tenfold).
const hotRace = true
