//go:build !linux

package redshard

// physicalMemory returns 0: the machine's memory is not known here.
func physicalMemory() int64 { return 0 }
