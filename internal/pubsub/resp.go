package pubsub

import (
	"errors"
	"strconv"
	"strings"
)

// The RESP2 a mux speaks with its front PubSub: commands in (arrays of bulk
// strings, as go-redis writes them), replies and messages out.

var errRESP = errors.New("redshard: pub/sub: malformed command from the client")

// parseCommand parses the command at the start of b. It returns its
// arguments and the number of bytes it took, or n == 0 when b does not hold
// a whole command yet.
func parseCommand(b []byte) (args []string, n int, err error) {
	if len(b) == 0 {
		return nil, 0, nil
	}
	if b[0] != '*' {
		return nil, 0, errRESP
	}
	count, pos, err := parseLen(b, 1)
	if err != nil || pos == 0 {
		return nil, 0, err
	}
	args = make([]string, 0, min(count, 64))
	for range count {
		if pos >= len(b) {
			return nil, 0, nil
		}
		if b[pos] != '$' {
			return nil, 0, errRESP
		}
		size, next, err := parseLen(b, pos+1)
		if err != nil || next == 0 {
			return nil, 0, err
		}
		if next+size+2 > len(b) {
			return nil, 0, nil
		}
		args = append(args, string(b[next:next+size]))
		pos = next + size + 2
	}
	return args, pos, nil
}

// parseLen reads the non-negative decimal number that starts at b[i] and
// ends with CRLF, and returns it with the index after the CRLF; next is 0
// when the line is not complete yet.
func parseLen(b []byte, i int) (v, next int, err error) {
	for j := i; j+1 < len(b); j++ {
		if b[j] != '\r' || b[j+1] != '\n' {
			continue
		}
		v, err := strconv.Atoi(string(b[i:j]))
		if err != nil || v < 0 || j-i > 10 {
			return 0, 0, errRESP
		}
		return v, j + 2, nil
	}
	if len(b)-i > 12 {
		return 0, 0, errRESP
	}
	return 0, 0, nil
}

func appendArray(b []byte, n int) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '\r', '\n')
}

func appendBulk(b []byte, s string) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, '\r', '\n')
	b = append(b, s...)
	return append(b, '\r', '\n')
}

func appendNil(b []byte) []byte { return append(b, "$-1\r\n"...) }

func appendInt(b []byte, n int) []byte {
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '\r', '\n')
}

func appendStatus(b []byte, s string) []byte {
	b = append(b, '+')
	b = append(b, s...)
	return append(b, '\r', '\n')
}

// appendError appends an error reply; msg must start with its prefix (ERR ...).
func appendError(b []byte, msg string) []byte {
	msg = strings.NewReplacer("\r", " ", "\n", " ").Replace(msg)
	b = append(b, '-')
	b = append(b, msg...)
	return append(b, '\r', '\n')
}
