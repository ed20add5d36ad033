module github.com/redshard/redshard

go 1.26.0

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/anishathalye/porcupine v1.3.1
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/dgraph-io/ristretto/v2 v2.4.2
	github.com/redis/go-redis/v9 v9.23.0
	go.uber.org/goleak v1.3.0
	golang.org/x/sync v0.25.0
)

require (
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
