package pubsub

import (
	"slices"
	"testing"
)

// FuzzParseCommand: parseCommand never panics; what it takes is a whole
// command, and a command it is given whole, in any split, comes back as it
// was written.
func FuzzParseCommand(f *testing.F) {
	f.Add([]byte("*2\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n"), "subscribe", "ch", 3)
	f.Add([]byte("*1\r\n$4\r\nping\r\n"), "ping", "", 1)
	f.Add([]byte("*-1\r\n"), "", "\r\n", 0)
	f.Add([]byte("$3\r\nabc\r\n"), "a\x00", "", 7)
	f.Fuzz(func(t *testing.T, raw []byte, a, b string, cut int) {
		if args, n, err := parseCommand(raw); err == nil && n > len(raw) || n < 0 || err != nil && n != 0 || n == 0 && args != nil {
			t.Fatalf("parseCommand(%q) = %q, %d, %v", raw, args, n, err)
		}
		want := []string{a, b}
		frame := appendBulk(appendBulk(appendArray(nil, 2), a), b)
		if cut = cut % (len(frame) + 1); cut < 0 {
			cut = -cut
		}
		if _, n, err := parseCommand(frame[:cut]); err != nil || n != 0 && cut < len(frame) {
			t.Fatalf("a cut frame (%d of %d bytes) gave n=%d, %v", cut, len(frame), n, err)
		}
		args, n, err := parseCommand(append(frame, "*1\r\n"...))
		if err != nil || n != len(frame) || !slices.Equal(args, want) {
			t.Fatalf("parseCommand(%q) = %q, %d, %v; want %q, %d", frame, args, n, err, want, len(frame))
		}
	})
}
