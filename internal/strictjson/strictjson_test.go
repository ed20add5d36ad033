package strictjson

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// FuzzCheckDuplicates: the duplicate check accepts any document whose
// objects' names are distinct ignoring case (a document re-encoded from
// its decoded value, which cannot repeat a name).
func FuzzCheckDuplicates(f *testing.F) {
	for _, s := range []string{
		`{"shards": [{"name": "a", "addr": "127.0.0.1:1"}]}`,
		`{"shards": [{"name": "a", "addr": "x:1", "addr": "x:2"}]}`,
		"\uFEFF" + `{"shards": [{"name": "a", "addr": "x:1", "weight": 0}], "health": {"interval": "1s"}}`,
		`{"shards": [[{}], {"a": [1, {"b": 2, "c": 3}]}]}`,
		`{"a": {"b": {}}, "c": [], "d": [[], [{}]]}`,
		`{"shards": [{"name": "a", "sentinel": {"master": "m", "addrs": ["s:26379", "t:1"]}}], "sentinel_password_env": "X"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = CheckDuplicates(data)
		_ = CheckDepth(data, 32)
		var v any
		if json.Unmarshal(data, &v) != nil || foldedCollision(v) {
			return
		}
		again, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckDuplicates(again); err != nil {
			t.Errorf("CheckDuplicates(%s) = %v; no object repeats a name", again, err)
		}
	})
}

// foldedCollision reports whether two names of one object of v are equal
// ignoring case.
func foldedCollision(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		seen := map[string]bool{}
		for k, x := range v {
			low := strings.ToLower(k)
			if seen[low] || foldedCollision(x) {
				return true
			}
			seen[low] = true
		}
	case []any:
		for _, x := range v {
			if foldedCollision(x) {
				return true
			}
		}
	}
	return false
}

// TestCheckDuplicatesDeep: the duplicate-field check stays linear
// whatever the depth (it used to rebuild each element's path at every
// depth), and still names the repeated field by its whole path.
func TestCheckDuplicatesDeep(t *testing.T) {
	const n = 100_000
	data := strings.Repeat(`{"a": [`, n) + `{"b": 1, "B": 2}` + strings.Repeat("]}", n)
	err := CheckDuplicates([]byte(data))
	if err == nil {
		t.Fatal("CheckDuplicates accepted an object naming b twice")
	}
	want := strings.Repeat("a[0].", n) + "B: the field is given twice"
	if !strings.HasPrefix(err.Error(), want) {
		msg := err.Error()
		if len(msg) > 200 {
			msg = msg[:100] + "..." + msg[len(msg)-100:]
		}
		t.Errorf("error %q does not start with the field's whole path", msg)
	}
}

func TestCheckDuplicates(t *testing.T) {
	for _, tc := range []struct{ data, want string }{
		{`{"a": 1, "b": {"a": 2}, "c": [{"a": 3}, {"a": 4}]}`, ""},
		{`{"a": 1, "A": 2}`, "A: the field is given twice (again at line 1, column 13); keep one"},
		{"{\"s\": [{\"x\": 1},\n {\"y\": 1, \"y\": 2}]}", "s[1].y: the field is given twice (again at line 2, column 14); keep one"},
		{`{"a": 1, "a"`, "a: the field is given twice (again at line 1, column 13); keep one"},
		{`{"a": [1,, "a": 2]`, ""}, // a syntax error is the decoder's to word
	} {
		err := CheckDuplicates([]byte(tc.data))
		if got := errString(err); got != tc.want {
			t.Errorf("CheckDuplicates(%s) = %q, want %q", tc.data, got, tc.want)
		}
	}
}

func TestCheckDepth(t *testing.T) {
	for _, tc := range []struct {
		data string
		max  int
		want string
	}{
		{`[[{"a": []}]]`, 4, ""},
		{`[[{"a": []}]]`, 3, "lists and objects nested deeper than 3 at line 1, column 9"},
		{`{"a": "[[[[[[[[\"[["}`, 1, ""}, // brackets in strings, an escaped quote
		{"[\n [\n  [", 2, "lists and objects nested deeper than 2 at line 3, column 3"},
		{`]]]][[`, 1, ""}, // unbalanced closers are the decoder's to word
	} {
		err := CheckDepth([]byte(tc.data), tc.max)
		if got := errString(err); got != tc.want {
			t.Errorf("CheckDepth(%s, %d) = %q, want %q", tc.data, tc.max, got, tc.want)
		}
	}
}

func TestSnakePath(t *testing.T) {
	for field, want := range map[string]string{
		"Health.GutterTTL":                 "health.gutter_ttl",
		"Shards[2].Weight":                 "shards[2].weight",
		"HotKeys.Detector.MinRate":         "hot_keys.detector.min_rate",
		"VnodesPerWeight":                  "vnodes_per_weight",
		"Shards[0].Failover.SentinelAddrs": "shards[0].failover.sentinel_addrs",
		"TLSConfig":                        "tls_config",
		"DB":                               "db",
		"Load.PollInterval":                "load.poll_interval",
	} {
		if got := SnakePath(field); got != want {
			t.Errorf("SnakePath(%q) = %q, want %q", field, got, want)
		}
	}
}

func TestDurations(t *testing.T) {
	var d Durations
	if got := d.Parse("a", ""); got != 0 || d.Err != nil {
		t.Fatalf(`Parse("") = %v, %v; want 0, nil`, got, d.Err)
	}
	if got := d.Parse("a", "1m30s"); got != 90*time.Second || d.Err != nil {
		t.Fatalf(`Parse("1m30s") = %v, %v; want 1m30s, nil`, got, d.Err)
	}
	d.Parse("b.c", "5 parsecs")
	want := `b.c: "5 parsecs" is not a duration (write it like "500ms" or "10m")`
	if errString(d.Err) != want {
		t.Fatalf("Err = %v, want %s", d.Err, want)
	}
	if got := d.Parse("d", "1s"); got != 0 || errString(d.Err) != want {
		t.Errorf(`Parse after an error = %v, %v; want 0 and the first error kept`, got, d.Err)
	}
}

func TestDecodeError(t *testing.T) {
	decode := func(data string) error {
		var v struct {
			A int      `json:"a"`
			B []string `json:"b"`
		}
		dec := json.NewDecoder(strings.NewReader(data))
		dec.DisallowUnknownFields()
		return DecodeError([]byte(data), dec.Decode(&v))
	}
	for _, tc := range []struct{ data, want string }{
		{"{\"a\": 1,\n \"b\": [\"x\",]}", "malformed JSON at line 2, column 13: invalid character ']' looking for beginning of value"},
		{`{"a": "one"}`, `a: JSON string where a number was expected (at line 1, column 12)`},
		{`{"b": {}}`, `b: JSON object where a list was expected (at line 1, column 8)`},
		{`{"a": 1, "c": 2}`, `json: unknown field "c"`},
	} {
		if got := errString(decode(tc.data)); got != tc.want {
			t.Errorf("DecodeError(%s) = %q, want %q", tc.data, got, tc.want)
		}
	}
	if name, ok := UnknownField(decode(`{"zz": 1}`)); !ok || name != `"zz"` {
		t.Errorf(`UnknownField = %q, %v; want "zz", true`, name, ok)
	}
	if _, ok := UnknownField(errors.New("json: cannot unmarshal")); ok {
		t.Error("UnknownField matched another error")
	}
}

func TestPosition(t *testing.T) {
	data := []byte("ab\ncd\n")
	for off, want := range map[int64]string{
		0: "line 1, column 1", 2: "line 1, column 3", 3: "line 2, column 1",
		5: "line 2, column 3", 6: "line 3, column 1", 99: "line 3, column 1",
	} {
		if got := Position(data, off); got != want {
			t.Errorf("Position(%d) = %q, want %q", off, got, want)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
