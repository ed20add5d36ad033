package redshard

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzParseConfig: no input makes parseConfig panic, and the duplicate
// check accepts any document whose objects' names are distinct ignoring
// case (a document re-encoded from its decoded value, which cannot repeat
// a name).
func FuzzParseConfig(f *testing.F) {
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
		_, _ = parseConfig(data, true)
		_, _ = parseConfig(data, false)
		var v any
		if json.Unmarshal(data, &v) != nil || foldedCollision(v) {
			return
		}
		again, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkDuplicateFields(again); err != nil {
			t.Errorf("checkDuplicateFields(%s) = %v; no object repeats a name", again, err)
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

// TestCheckDuplicateFieldsDeep: the duplicate-field check stays linear
// whatever the depth (it used to rebuild each element's path at every
// depth), and still names the repeated field by its whole path.
func TestCheckDuplicateFieldsDeep(t *testing.T) {
	const n = 100_000
	data := strings.Repeat(`{"a": [`, n) + `{"b": 1, "B": 2}` + strings.Repeat("]}", n)
	err := checkDuplicateFields([]byte(data))
	if err == nil {
		t.Fatal("checkDuplicateFields accepted an object naming b twice")
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
