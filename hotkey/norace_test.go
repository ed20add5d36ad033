//go:build !race

package hotkey_test

const raceEnabled = false
