package connname

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
)

// Prefix starts the name (CLIENT SETNAME) of every command connection of
// a fleet process; its incarnation and member id follow.
const Prefix = "rsf:"

// IncarnationLen is the length of a process's incarnation token: 16
// lowercase hex digits (64 random bits).
const IncarnationLen = 16

// NewIncarnation draws a process's incarnation token (registry.Member's
// Incarnation).
func NewIncarnation() string {
	var b [IncarnationLen / 2]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b[:])
}

// Name returns the connection name of a member's incarnation: Prefix, the
// incarnation, ':' and the member id escaped. Redis accepts only '!' to
// '~' in a name, so every byte outside that range, and the escape
// character '%' itself, is written %XX (uppercase hex): the name is valid
// for every id, and two distinct (id, incarnation) pairs never share a
// name (the incarnation has a fixed alphabet without ':', and the escaping
// is injective). Parse inverts it.
func Name(memberID, incarnation string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(Prefix) + len(incarnation) + 1 + len(memberID))
	b.WriteString(Prefix)
	b.WriteString(incarnation)
	b.WriteByte(':')
	for i := 0; i < len(memberID); i++ {
		c := memberID[i]
		if c < '!' || c > '~' || c == '%' {
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&0xf])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// Member is a (member id, incarnation) pair: the identity a fleet
// connection's name carries.
type Member struct{ ID, Incarnation string }

// Parse returns the member and incarnation a connection name made by Name
// carries; ok is false for any other name, including one that starts with
// Prefix but that Name cannot have made (another version's, or one set by
// hand).
func Parse(name string) (m Member, ok bool) {
	rest, ok := strings.CutPrefix(name, Prefix)
	if !ok {
		return Member{}, false
	}
	inc, enc, ok := strings.Cut(rest, ":")
	if !ok || !ValidIncarnation(inc) {
		return Member{}, false
	}
	id := make([]byte, 0, len(enc))
	for i := 0; i < len(enc); i++ {
		c := enc[i]
		switch {
		case c == '%':
			if i+2 >= len(enc) {
				return Member{}, false
			}
			hi, lo := upperHex(enc[i+1]), upperHex(enc[i+2])
			if hi < 0 || lo < 0 {
				return Member{}, false
			}
			d := byte(hi<<4 | lo)
			if d >= '!' && d <= '~' && d != '%' {
				return Member{}, false // Name writes it as is
			}
			id = append(id, d)
			i += 2
		case c < '!' || c > '~':
			return Member{}, false
		default:
			id = append(id, c)
		}
	}
	return Member{string(id), inc}, true
}

// ValidIncarnation reports whether s is an incarnation token as
// NewIncarnation makes them.
func ValidIncarnation(s string) bool {
	if len(s) != IncarnationLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// upperHex returns the value of an uppercase hex digit, -1 for any other
// byte.
func upperHex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
