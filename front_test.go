package redshard

import (
	"context"
	"errors"
	"testing"
)

// A connection of the front client is handed out, and fails with
// ErrNotSharded on first use.
func TestFrontConnRefusesOnUse(t *testing.T) {
	cn, err := dialFront(context.Background(), "tcp", "redshard:0")
	if err != nil {
		t.Fatalf("dialFront: %v", err)
	}
	if _, err := cn.Write([]byte("*1\r\n$4\r\nPING\r\n")); !errors.Is(err, ErrNotSharded) {
		t.Fatalf("Write: %v, want ErrNotSharded", err)
	}
	if _, err := cn.Read(make([]byte, 16)); !errors.Is(err, ErrNotSharded) {
		t.Fatalf("Read: %v, want ErrNotSharded", err)
	}
}
