package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// These tests cover the runner's own logic (rewrite, classification,
// allow-list, gate) without servers or go-redis; the runner itself is run
// by .ci/run.

const specSrc = `package redis_test

import (
	. "github.com/bsm/ginkgo/v2"

	"github.com/redis/go-redis/v9"
)

var _ = Describe("X", func() {
	var client *redis.Client
	BeforeEach(func() {
		client = redis.NewClient(redisOptions())
		other := redis.NewClusterClient(nil)
		_ = other
	})
	It("works", func() { _ = redis.NewClient(&redis.Options{}) })
})
`

func TestRewriteSpecFile(t *testing.T) {
	out, st, err := rewriteSpecFile("x_test.go", []byte(specSrc))
	if err != nil {
		t.Fatal(err)
	}
	if st.Constructors != 2 || st.Types != 1 || st.Dropped != 0 {
		t.Errorf("stats %+v, want 2 constructors, 1 type", st)
	}
	s := string(out)
	for _, want := range []string{"var client *subjectClient", "client = newSubjectClient(redisOptions())", "_ = newSubjectClient(&redis.Options{})", "redis.NewClusterClient(nil)"} {
		if !strings.Contains(s, want) {
			t.Errorf("rewritten file lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "redis.NewClient(") || strings.Contains(s, "*redis.Client") {
		t.Errorf("rewritten file still has a plain constructor or type:\n%s", s)
	}
}

const mainSrc = `package redis_test

import (
	"os"

	. "github.com/bsm/ginkgo/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
)

var cluster = 1

const (
	redisSecondaryPort = "6381"
)

const ringShard1Port = "6390"

var redisAddr = ":6379"

// BeforeSuite connects to fixed ports.
var _ = BeforeSuite(func() {
	logging.Disable()
	_ = cluster
})

var _ = AfterSuite(func() {})

func cleanupTLSCluster() {}

func newUniversalSubject(c *redis.Client) (redis.UniversalClient, func() error) {
	_ = os.Getenv("X")
	return c, c.Close
}

func connectTo(port string) *redis.Client { return nil }
`

func TestRewriteMainFile(t *testing.T) {
	out, st, err := rewriteMainFile("main_test.go", []byte(mainSrc))
	if err != nil {
		t.Fatal(err)
	}
	if st.Dropped != 5 || st.Types != 1 {
		t.Errorf("stats %+v, want 5 dropped, 1 type", st)
	}
	s := string(out)
	for _, gone := range []string{"BeforeSuite", "AfterSuite", "var cluster", "cleanupTLSCluster", "logging", "fixed ports", "redisSecondaryPort", "6381"} {
		if strings.Contains(s, gone) {
			t.Errorf("rewritten main_test.go still has %q:\n%s", gone, s)
		}
	}
	for _, want := range []string{"func newUniversalSubject(c *subjectClient)", "func connectTo(port string) *redis.Client", `var redisAddr = ":6379"`, `"os"`, `const ringShard1Port = "6390"`} {
		if !strings.Contains(s, want) {
			t.Errorf("rewritten main_test.go lacks %q:\n%s", want, s)
		}
	}
}

func TestExtractDecls(t *testing.T) {
	src := `package redis_test

import (
	"bytes"
	"strings"

	. "github.com/bsm/gomega"
)

var _ = Describe("race", func() {})

func bigVal() []byte { return bytes.Repeat([]byte{'*'}, 10) }

func other() string { return strings.Repeat("x", 2) }
`
	out, err := extractDecls("race_test.go", []byte(src), []string{"bigVal"})
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	if !strings.Contains(s, "func bigVal()") || strings.Contains(s, "other") || strings.Contains(s, "Describe") ||
		strings.Contains(s, "strings") || strings.Contains(s, "gomega") || !strings.Contains(s, `"bytes"`) {
		t.Errorf("extracted:\n%s", s)
	}
	if _, err := extractDecls("race_test.go", []byte(src), []string{"missing"}); err == nil {
		t.Error("extracting a missing declaration did not fail")
	}
}

func TestClassify(t *testing.T) {
	texts, err := readRefusalTexts(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ msg, class, reason string }{
		{"Unexpected error:\n    <*fmt.wrapError | 0x1>: \n    " + texts.NotSharded + ": INFO: run it on each shard with Client.ForEachShard\n    {\n msg: \"...\"}",
			classNotSharded, "not-sharded: INFO: run it on each shard with Client.ForEachShard"},
		{"Expected\n    <*errors.errorString>: " + texts.CrossShard + "\nto be nil", classCrossShard, "cross-shard: " + texts.CrossShard},
		{"Expected\n    <int64>: 0\nto equal\n    <int64>: 1", classOther, "other: Expected <int64>: 0 to equal <int64>: 1"},
		{"Unexpected error:\n    <proto.RedisError>: \n    ERR unknown command 'waitAOF'\noccurred", classOther, "other: ERR unknown command 'waitAOF'"},
	}
	for _, c := range cases {
		if got := texts.classify(c.msg); got != c.class {
			t.Errorf("classify(%q) = %s, want %s", c.msg, got, c.class)
		}
		if got := texts.reason(c.class, c.msg); got != c.reason {
			t.Errorf("reason(%q) = %q, want %q", c.msg, got, c.reason)
		}
	}
}

func TestGateAndAllowList(t *testing.T) {
	texts, err := readRefusalTexts(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	configs := allConfigs
	results := map[string][]spec{}
	for _, c := range configs {
		results[c.Name] = []spec{
			{Key: "a", Class: classPassed},
			{Key: "b", Class: classPassed},
			{Key: "c", Class: classOther}, // fails on plain too: never gated
		}
	}
	results["rs4-resp2"][0] = spec{Key: "a", Class: classCrossShard, Message: texts.CrossShard}
	results["rs1-resp2"][0] = spec{Key: "a", Class: classCrossShard, Message: texts.CrossShard}
	results["rs1-resp3"][1] = spec{Key: "b", Class: classNotSharded, Message: texts.NotSharded + ": INFO: use ForEachShard"}
	results["rs4-resp3"][1] = spec{Key: "b", Class: classNotSharded, Message: texts.NotSharded + ": INFO: use ForEachShard"}
	results["rs1-resp3"][2] = spec{Key: "c", Class: classNotSharded}

	unexcused, _, accepted := gate(configs, results, nil)
	if cross := len(accepted); cross != 1 || len(unexcused) != 3 {
		t.Fatalf("gate without allow-list: accepted %+v, unexcused %+v; want 1 (rs4-resp2 a), 3 (rs1-resp2 a, rs1-resp3 b, rs4-resp3 b)", accepted, unexcused)
	}
	list := allowListFor(unexcused, texts)
	want := "rs1-resp2 | a | cross-shard: " + texts.CrossShard + "\nrs1-resp3,rs4-resp3 | b | not-sharded: INFO: use ForEachShard\n"
	if list != want {
		t.Errorf("allowListFor:\n%s\nwant:\n%s", list, want)
	}
	file := filepath.Join(t.TempDir(), "allow.txt")
	if err := writeAllowList(file, list+"rs* | gone | other: fixed since\n"); err != nil {
		t.Fatal(err)
	}
	allow, err := readAllowList(file)
	if err != nil {
		t.Fatal(err)
	}
	unexcused, excused, _ := gate(configs, results, allow)
	if len(unexcused) != 0 || len(excused) != 3 {
		t.Errorf("gate with allow-list: unexcused %+v, excused %d", unexcused, len(excused))
	}
	if !allow[0].used || !allow[1].used || allow[2].used {
		t.Errorf("used: %v %v %v, want the last entry stale", allow[0].used, allow[1].used, allow[2].used)
	}

	if err := os.WriteFile(file, []byte("rs1 | spec without reason\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readAllowList(file); err == nil {
		t.Error("a malformed line was accepted")
	}
}

func TestFoldConfigs(t *testing.T) {
	cases := map[string][]string{
		"rs*":                 {"rs1-resp2", "rs1-resp3", "rs4-resp2", "rs4-resp3", "rs4churn-resp2", "rs4churn-resp3"},
		"rs1-*,rs4-*":         {"rs1-resp2", "rs1-resp3", "rs4-resp2", "rs4-resp3"},
		"rs4-*,rs4churn-*":    {"rs4-resp2", "rs4-resp3", "rs4churn-resp2", "rs4churn-resp3"},
		"rs4churn-resp3":      {"rs4churn-resp3"},
		"rs1-*":               {"rs1-resp2", "rs1-resp3"},
		"rs1-resp2,rs4-*":     {"rs1-resp2", "rs4-resp2", "rs4-resp3"},
		"rs4-resp3":           {"rs4-resp3"},
		"rs1-*,rs4-resp2":     {"rs1-resp2", "rs1-resp3", "rs4-resp2"},
		"rs1-resp3,rs4-*":     {"rs1-resp3", "rs4-resp2", "rs4-resp3"},
		"rs1-resp2,rs4-resp3": {"rs1-resp2", "rs4-resp3"},
	}
	for want, set := range cases {
		m := map[string]bool{}
		for _, c := range set {
			m[c] = true
		}
		if got := foldConfigs(m); got != want {
			t.Errorf("foldConfigs(%v) = %q, want %q", set, got, want)
		}
	}
}

// A change refusal (ErrHandoffInProgress, ErrStaleCursor) is accepted in a
// churn configuration only: on a steady ring nothing changes, so it is a
// failure there; and a churn failure of any other class is not accepted.
func TestGateChurn(t *testing.T) {
	texts, err := readRefusalTexts(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for msg, want := range map[string]string{
		"redshard: FLUSHDB in a pipeline: " + texts.Handoff:        classChange,
		"redshard: " + texts.StaleCursor + ": cursor 12":           classChange,
		"Expected\n    <string>: \n to equal\n    <string>: hello": classOther,
	} {
		if got := texts.classify(msg); got != want {
			t.Errorf("classify(%q) = %s, want %s", msg, got, want)
		}
	}
	configs := allConfigs
	results := map[string][]spec{}
	for _, c := range configs {
		results[c.Name] = []spec{{Key: "a", Class: classPassed}, {Key: "b", Class: classPassed}}
	}
	refused := spec{Key: "a", Class: classChange, Message: texts.StaleCursor}
	results["rs4-resp2"][0] = refused
	results["rs4churn-resp2"][0] = refused
	results["rs4churn-resp3"][1] = spec{Key: "b", Class: classOther, Message: "Expected <string>: to equal <string>: hello"}
	unexcused, _, accepted := gate(configs, results, nil)
	if len(accepted) != 1 || accepted[0].Config != "rs4churn-resp2" {
		t.Errorf("accepted %+v, want the change refusal of rs4churn-resp2 only", accepted)
	}
	var got []string
	for _, f := range unexcused {
		got = append(got, f.Config+" "+f.Spec.Key)
	}
	if strings.Join(got, ",") != "rs4-resp2 a,rs4churn-resp3 b" {
		t.Errorf("unexcused %v, want [rs4-resp2 a, rs4churn-resp3 b]", got)
	}
}

func TestChurnedIn(t *testing.T) {
	for out, want := range map[string]bool{
		"": false,
		"churn    1.000s: client 3 created on 4 shards\nchurn    1.010s: client 3 closed\n":                              false,
		"churn    1.000s: client 3 created on 4 shards\nchurn    1.100s: change #4: +shard4 (5 shards) on clients [3]\n": true,
		"churn    2.000s: change #4 finished\n":                                                                          true,
		"some spec output: change #4 finished\n":                                                                         false,
	} {
		if got := churnedIn(out); got != want {
			t.Errorf("churnedIn(%q) = %v, want %v", out, got, want)
		}
	}
}
