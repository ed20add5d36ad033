package command

import (
	"encoding"
	"net"
	"strconv"
	"time"
)

// Arg returns the text of one argument exactly as go-redis v9 writes it on
// the wire (internal/proto Writer.WriteArg): strings and []byte as they are,
// nil as "", integers in decimal, floats in the shortest 'f' form, bool as
// "1"/"0", time.Time in RFC 3339 with nanoseconds, time.Duration as
// nanoseconds, pointers to those as their value (nil as the zero value),
// encoding.BinaryMarshaler as its bytes and net.IP as its raw bytes.
//
// For a value go-redis cannot write (an unsupported type, or a
// MarshalBinary error) it returns "": go-redis fails such a command before
// sending it, wherever it is routed. Arg is safe for concurrent use; it
// allocates only to convert []byte and numbers.
func Arg(a interface{}) string {
	// Keys are strings nearly always: small enough to inline, the check
	// spares routing a call and a long type switch per key.
	if s, ok := a.(string); ok {
		return s
	}
	return argText(a)
}

// argText is Arg for every type.
func argText(a interface{}) string {
	// The cases and their order mirror WriteArg, so that a type matching
	// several cases (time.Time is also a BinaryMarshaler) is written the same.
	switch v := a.(type) {
	case nil:
		return ""
	case string:
		return v
	case *string:
		if v == nil {
			return ""
		}
		return *v
	case []byte:
		return string(v)
	case int:
		return strconv.FormatInt(int64(v), 10)
	case *int:
		return formatIntPtr(v)
	case int8:
		return strconv.FormatInt(int64(v), 10)
	case *int8:
		return formatIntPtr(v)
	case int16:
		return strconv.FormatInt(int64(v), 10)
	case *int16:
		return formatIntPtr(v)
	case int32:
		return strconv.FormatInt(int64(v), 10)
	case *int32:
		return formatIntPtr(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case *int64:
		return formatIntPtr(v)
	case uint:
		return strconv.FormatUint(uint64(v), 10)
	case *uint:
		return formatUintPtr(v)
	case uint8:
		return strconv.FormatUint(uint64(v), 10)
	case *uint8:
		return formatUintPtr(v)
	case uint16:
		return strconv.FormatUint(uint64(v), 10)
	case *uint16:
		return formatUintPtr(v)
	case uint32:
		return strconv.FormatUint(uint64(v), 10)
	case *uint32:
		return formatUintPtr(v)
	case uint64:
		return strconv.FormatUint(v, 10)
	case *uint64:
		return formatUintPtr(v)
	case uintptr:
		return strconv.FormatUint(uint64(v), 10)
	case *uintptr:
		return formatUintPtr(v)
	case float32:
		return formatFloat(float64(v))
	case *float32:
		if v == nil {
			return "0"
		}
		return formatFloat(float64(*v))
	case float64:
		return formatFloat(v)
	case *float64:
		if v == nil {
			return "0"
		}
		return formatFloat(*v)
	case bool:
		return formatBool(v)
	case *bool:
		return formatBool(v != nil && *v)
	case time.Time:
		return v.Format(time.RFC3339Nano)
	case *time.Time:
		if v == nil {
			return time.Time{}.Format(time.RFC3339Nano)
		}
		return v.Format(time.RFC3339Nano)
	case time.Duration:
		return strconv.FormatInt(v.Nanoseconds(), 10)
	case *time.Duration:
		if v == nil {
			return "0"
		}
		return strconv.FormatInt(v.Nanoseconds(), 10)
	case encoding.BinaryMarshaler:
		b, err := v.MarshalBinary()
		if err != nil {
			return ""
		}
		return string(b)
	case net.IP:
		return string(v)
	default:
		return ""
	}
}

type signed interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64
}

type unsigned interface {
	~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr
}

func formatIntPtr[T signed](p *T) string {
	if p == nil {
		return "0"
	}
	return strconv.FormatInt(int64(*p), 10)
}

func formatUintPtr[T unsigned](p *T) string {
	if p == nil {
		return "0"
	}
	return strconv.FormatUint(uint64(*p), 10)
}

func formatFloat(f float64) string {
	return strconv.FormatFloat(f, 'f', -1, 64)
}

func formatBool(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// isWord reports whether argument a is the keyword w (ASCII lower-case, with
// at least one letter),
// compared without case like Redis's strcasecmp. It does not allocate for
// string and []byte arguments.
func isWord(a interface{}, w string) bool {
	switch v := a.(type) {
	case string:
		return foldEqual(v, w)
	case []byte:
		if len(v) != len(w) {
			return false
		}
		for i, c := range v {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != w[i] {
				return false
			}
		}
		return true
	case int, int64, int32, uint64, float64, bool, nil:
		return false // keywords have letters; these never do
	default:
		return foldEqual(Arg(a), w)
	}
}

// foldEqual reports whether s equals the lower-case ASCII word w, ignoring
// ASCII case only (strings.EqualFold would also match Unicode look-alikes
// such as "ſtore", which Redis does not).
func foldEqual(s, w string) bool {
	if len(s) != len(w) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != w[i] {
			return false
		}
	}
	return true
}

// argInt returns argument a as an integer the way Redis parses one
// (string2ll: an optional '-', no '+', no spaces, no leading zeros). It does
// not allocate for integer, string and []byte arguments.
func argInt(a interface{}) (int64, bool) {
	switch v := a.(type) {
	case int:
		return int64(v), true
	case int64:
		return v, true
	case int32:
		return int64(v), true
	case uint64:
		if v > 1<<63-1 {
			return 0, false
		}
		return int64(v), true
	case string:
		return parseInt(v)
	case []byte:
		return parseIntBytes(v)
	default:
		return parseInt(Arg(a))
	}
}

func parseInt(s string) (int64, bool) {
	neg := len(s) > 0 && s[0] == '-'
	digits := s
	if neg {
		digits = s[1:]
	}
	if len(digits) == 0 || len(digits) > 19 || (digits[0] == '0' && (len(digits) > 1 || neg)) {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	if neg {
		if n > 1<<63 {
			return 0, false
		}
		return -int64(n), true
	}
	if n > 1<<63-1 {
		return 0, false
	}
	return int64(n), true
}

func parseIntBytes(b []byte) (int64, bool) {
	if len(b) > 20 {
		return 0, false
	}
	var buf [20]byte
	n := copy(buf[:], b)
	return parseInt(string(buf[:n]))
}

// argEmpty reports whether argument a is written as the empty string.
func argEmpty(a interface{}) bool {
	switch v := a.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case []byte:
		return len(v) == 0
	default:
		return Arg(a) == ""
	}
}
