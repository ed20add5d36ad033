package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// CheckDepth refuses data that nests lists and objects deeper than max,
// naming where the limit is crossed ("lists and objects nested deeper than
// 32 at line 1, column 33"). It reads each byte once, skipping strings (a
// bracket in a string is no nesting); a syntax error is left to the
// decoder, which words it.
func CheckDepth(data []byte, max int) error {
	depth := 0
	inString, escaped := false, false
	for i, c := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			if depth > max {
				return fmt.Errorf("lists and objects nested deeper than %d at %s", max, Position(data, int64(i)))
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return nil
}

// CheckDuplicates refuses an object, at any depth, that names a field
// twice: encoding/json would keep the last value silently. Names are
// compared as encoding/json matches them, ignoring case. The error gives
// the field's path as the data spells it ("shards[1].addr") and where the
// second one is. Syntax errors are left to the decoder, which words them.
func CheckDuplicates(data []byte) error {
	// Each frame keeps only its own step of the path (".addr", "[1]"): the
	// whole path is built once, for the error, so the check stays linear
	// in the data's size whatever its depth.
	type frame struct {
		object bool
		keys   map[string]bool // lower-cased names seen in this object
		key    bool            // in an object: the next token is a key or '}'
		step   string          // this object's or list's step from its parent
		index  int             // in a list: the next element's index
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var stack []*frame
	var keyStep string // step of the value after the key just read
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // io.EOF, or a syntax error the decoder reports
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.key {
			if tok == json.Delim('}') {
				stack = stack[:len(stack)-1]
				continue
			}
			k, _ := tok.(string) // an object's keys are strings
			keyStep = "." + k
			low := strings.ToLower(k)
			if top.keys[low] {
				var b strings.Builder
				for _, f := range stack {
					b.WriteString(f.step)
				}
				b.WriteString(keyStep)
				return fmt.Errorf("%s: the field is given twice (again at %s); keep one",
					strings.TrimPrefix(b.String(), "."), Position(data, dec.InputOffset()))
			}
			top.keys[low] = true
			top.key = false
			continue
		}
		step := keyStep
		switch {
		case top != nil && top.object:
			top.key = true // after this value: a key or '}'
		case top != nil:
			step = "[" + strconv.Itoa(top.index) + "]"
			top.index++
		default:
			step = ""
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, keys: map[string]bool{}, key: true, step: step})
		case json.Delim('['):
			stack = append(stack, &frame{step: step})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}

// SnakePath spells a Go field path ("Health.GutterTTL",
// "Shards[2].Weight") as a JSON file with snake_case names does
// ("health.gutter_ttl", "shards[2].weight"): an underscore before an upper
// case letter that ends a lower case word or starts a word after an
// initialism, everything lower-cased.
func SnakePath(field string) string {
	var b strings.Builder
	rs := []rune(field)
	for i, r := range rs {
		upper := r >= 'A' && r <= 'Z'
		if upper && i > 0 && rs[i-1] != '.' {
			prevLower := rs[i-1] >= 'a' && rs[i-1] <= 'z' || rs[i-1] >= '0' && rs[i-1] <= '9'
			nextLower := i+1 < len(rs) && rs[i+1] >= 'a' && rs[i+1] <= 'z'
			if prevLower || (nextLower && rs[i-1] >= 'A' && rs[i-1] <= 'Z') {
				b.WriteByte('_')
			}
		}
		if upper {
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Durations parses duration fields and keeps the first error. Its zero
// value is ready to use; it is not safe for concurrent use.
type Durations struct {
	// Err is the first field that was not a duration, nil if none.
	Err error
}

// Parse returns the duration s names ("" is 0, and so is anything after
// the first error). field names it in the error. The range is left to the
// caller.
func (d *Durations) Parse(field, s string) time.Duration {
	if s == "" || d.Err != nil {
		return 0
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		d.Err = fmt.Errorf("%s: %q is not a duration (write it like \"500ms\" or \"10m\")", field, s)
	}
	return v
}

// DecodeError rewrites an error of encoding/json's decoding of data so
// that it names the line and column, and for a value of the wrong type
// the field and what was expected. Other errors are returned as they are.
func DecodeError(data []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("malformed JSON at %s: %v", Position(data, syn.Offset), syn)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "(top level)"
		}
		return fmt.Errorf("%s: JSON %s where %s was expected (at %s)", field, typ.Value, Kind(typ.Type.Kind().String()), Position(data, typ.Offset))
	}
	return err
}

// UnknownField returns the quoted name in the error of a
// json.Decoder.DisallowUnknownFields decoding that met a field its
// destination lacks (`"x"`), and false for any other error. encoding/json
// does not type that error: its text is `json: unknown field "x"`.
func UnknownField(err error) (string, bool) {
	return strings.CutPrefix(err.Error(), "json: unknown field ")
}

// Kind names a Go kind (reflect.Kind's String) the way a JSON file's
// author thinks of it: "a string", "true or false", "a list", "an object",
// else "a number".
func Kind(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice":
		return "a list"
	case "struct", "ptr":
		return "an object"
	}
	return "a number"
}

// Position turns a byte offset of data into "line L, column C" (both from
// 1). An offset past the end is the end.
func Position(data []byte, off int64) string {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := off - int64(bytes.LastIndexByte(data[:off], '\n'))
	return fmt.Sprintf("line %d, column %d", line, col)
}
