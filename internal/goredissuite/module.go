package main

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

const (
	goRedisModule  = "github.com/redis/go-redis/v9"
	goRedisVersion = "v9.23.0"
	redshardModule = "github.com/redshard/redshard"
)

// specFiles are go-redis's suites that run through redshard. They are
// rewritten (see rewrite.go) in the temporary copy.
var specFiles = []string{
	"commands_test.go",
	"pipeline_test.go",
	"tx_test.go",
	"pubsub_test.go",
	"iterator_test.go",
}

// helperFiles are the suite's test files the spec files need, copied as
// they are except main_test.go (rewritten, see rewrite.go). export_test.go
// is package redis and exports internals some specs use; re_endpoints_test.go
// holds helpers redisOptions calls (it has no specs).
var helperFiles = []string{"main_test.go", "export_test.go", "re_endpoints_test.go"}

// helperDecls are helpers the spec files use from test files whose specs
// are not run: only these declarations are copied (extractDecls), into
// zz_goredissuite_<file>.
var helperDecls = map[string][]string{
	"race_test.go": {"bigVal"},
}

//go:embed shim/*.txt
var shims embed.FS

// goEnv is the environment of every go command the runner runs in the
// temporary module: outside any workspace, allowed to complete go.mod.
func goEnv() []string {
	return append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
}

// findGoRedis returns the directory of go-redis v9.23.0 in the module cache
// (downloading it if the cache lacks it, as `go mod download` does).
func findGoRedis(repo string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", goRedisModule+"@"+goRedisVersion)
	cmd.Dir = repo
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &info); jerr != nil && err == nil {
		err = jerr
	}
	if err != nil || info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: %v %s %s", goRedisModule, goRedisVersion, err, info.Error, stderr.String())
	}
	return info.Dir, nil
}

// prepareModule copies go-redis from src into dst (a temporary directory):
// every non-test file of the module, and of the root package's test files
// only specFiles and helperFiles, rewritten as rewrite.go describes, plus
// the shims. dst's go.mod gains a requirement on redshard, replaced by the
// checkout at repo. go-redis itself is the main module there, so redshard
// is built against this very copy and the suite's internal imports work.
func prepareModule(src, dst, repo string) (rewriteStats, error) {
	var total rewriteStats
	keep := map[string]bool{}
	for _, f := range append(append([]string{}, specFiles...), helperFiles...) {
		keep[f] = true
	}
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if strings.HasSuffix(rel, "_test.go") && (filepath.Dir(rel) != "." || !keep[rel]) {
			names, ok := helperDecls[rel]
			if !ok || filepath.Dir(rel) != "." {
				return nil // tests of other files and of sub-packages are not run
			}
			data, err := os.ReadFile(path)
			if err == nil {
				data, err = extractDecls(rel, data, names)
			}
			if err != nil {
				return fmt.Errorf("extract helpers of %s: %w", rel, err)
			}
			return os.WriteFile(filepath.Join(dst, "zz_goredissuite_"+rel), data, 0o644)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var st rewriteStats
		switch {
		case rel == "main_test.go":
			data, st, err = rewriteMainFile(rel, data)
		case filepath.Dir(rel) == "." && strings.HasSuffix(rel, "_test.go") && !slices.Contains(helperFiles, rel):
			data, st, err = rewriteSpecFile(rel, data)
			if err == nil && (st.Constructors == 0 || st.Types == 0) {
				// Counted per file: a spec file the rewrite misses would run
				// the plain client in redshard's configurations and pass.
				err = fmt.Errorf("found %d redis.NewClient calls and %d *redis.Client types to replace, want at least one of each", st.Constructors, st.Types)
			}
		}
		if err != nil {
			return fmt.Errorf("rewrite %s: %w", rel, err)
		}
		total.Constructors += st.Constructors
		total.Types += st.Types
		total.Dropped += st.Dropped
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		return total, err
	}
	for _, f := range append(append([]string{}, specFiles...), helperFiles...) {
		if _, err := os.Stat(filepath.Join(dst, f)); err != nil {
			return total, fmt.Errorf("go-redis %s has no %s: %w", goRedisVersion, f, err)
		}
	}
	entries, err := shims.ReadDir("shim")
	if err != nil {
		return total, err
	}
	for _, e := range entries {
		data, err := shims.ReadFile("shim/" + e.Name())
		if err != nil {
			return total, err
		}
		name := "zz_goredissuite_" + strings.TrimSuffix(e.Name(), ".txt")
		if err := os.WriteFile(filepath.Join(dst, name), data, 0o644); err != nil {
			return total, err
		}
	}
	// go.mod: require redshard from the checkout. go.sum: redshard's own
	// sums, so its dependencies need no lookup beyond the module cache.
	gomod, err := os.OpenFile(filepath.Join(dst, "go.mod"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return total, err
	}
	_, err = fmt.Fprintf(gomod, "\nrequire %s v0.0.0\n\nreplace %s => %s\n", redshardModule, redshardModule, repo)
	if cerr := gomod.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return total, err
	}
	sums, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	if err != nil {
		return total, err
	}
	gosum, err := os.OpenFile(filepath.Join(dst, "go.sum"), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return total, err
	}
	_, err = gosum.Write(sums)
	if cerr := gosum.Close(); err == nil {
		err = cerr
	}
	return total, err
}

// suiteBinary is one of the test binaries: the plain baseline, the redshard
// one (build tag redshardsuite) and redshard under membership churn
// (redshardsuite,redshardchurn).
type suiteBinary struct{ name, tags string }

var (
	plainSuite = suiteBinary{"plain", ""}
	rsSuite    = suiteBinary{"redshard", "redshardsuite"}
	churnSuite = suiteBinary{"churn", "redshardsuite,redshardchurn"}
)

// binaryFor is the test binary that runs configuration c.
func binaryFor(c config) suiteBinary {
	switch {
	case c.Shards == 0:
		return plainSuite
	case c.Churn:
		return churnSuite
	}
	return rsSuite
}

// buildSuites compiles in dir the test binaries the configurations need
// and returns their paths by name.
func buildSuites(dir string, configs []config) (map[string]string, error) {
	var need []suiteBinary
	for _, c := range configs {
		if b := binaryFor(c); !slices.Contains(need, b) {
			need = append(need, b)
		}
	}
	paths := map[string]string{}
	for _, b := range need {
		out := filepath.Join(dir, b.name+".test")
		paths[b.name] = out
		// -trimpath: the build cache does not depend on the temporary
		// directory, so a second run compiles only what changed.
		args := []string{"test", "-c", "-trimpath", "-o", out}
		if b.tags != "" {
			args = append(args, "-tags", b.tags)
		}
		cmd := exec.Command("go", append(args, ".")...)
		cmd.Dir = dir
		cmd.Env = goEnv()
		msg, err := cmd.CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, msg)
		}
	}
	return paths, nil
}
