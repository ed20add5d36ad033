// Package parallel runs n calls of one function at once and waits for
// them: the fan-out the root, the hot-key layer, the fleet driver and the
// beacons share. It holds no state and starts no goroutine that outlives
// Run.
package parallel

import "sync"

// Run calls fn(0), ..., fn(n-1) and returns once all have returned. fn(0)
// runs on the caller's goroutine, the others on one new goroutine each, so
// n == 1 costs no goroutine. n <= 0 does nothing.
func Run(n int, fn func(i int)) {
	if n <= 0 {
		return
	}
	var wg sync.WaitGroup
	for i := 1; i < n; i++ {
		wg.Go(func() { fn(i) })
	}
	fn(0)
	wg.Wait()
}
