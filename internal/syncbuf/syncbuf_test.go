package syncbuf

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestConcurrentWrites: writes from several goroutines while another reads
// all land, whole (run with -race).
func TestConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				fmt.Fprintf(&b, "g%d-%d\n", g, i)
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 {
			_ = b.String()
		}
	}()
	wg.Wait()
	<-done
	if n := strings.Count(b.String(), "\n"); n != 400 {
		t.Fatalf("%d lines, want 400", n)
	}
	c := b.Bytes()
	c[0] = 'X'
	if b.String()[0] == 'X' {
		t.Fatal("Bytes shares the buffer")
	}
}
