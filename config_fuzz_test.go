package redshard

import "testing"

// FuzzParseConfig: no input makes parseConfig panic. (The duplicate
// check's own property, on the same seeds, is FuzzCheckDuplicates in
// internal/strictjson.)
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
	})
}
