package redshard

import (
	"bufio"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestWorkspaceModulesAgree: every module of go.work requires each
// dependency at the one version the workspace builds with, so each is
// built and tested against the version its own go.mod names, and a fresh
// clone's first build (go run ./examples/quickstart) downloads nothing that
// another module's go.mod does not already name. The library's go.mod once
// said golang.org/x/sys v0.48.0 while cmd's asked v0.50.0.
func TestWorkspaceModulesAgree(t *testing.T) {
	dirs := workspaceDirs(t, "go.work")
	if len(dirs) < 2 {
		t.Fatalf("go.work uses %v; want the library and its companion modules", dirs)
	}
	versions := map[string]map[string][]string{} // dependency -> version -> modules
	for _, dir := range dirs {
		for dep, v := range moduleRequires(t, filepath.Join(dir, "go.mod")) {
			if versions[dep] == nil {
				versions[dep] = map[string][]string{}
			}
			versions[dep][v] = append(versions[dep][v], dir)
		}
	}
	deps := make([]string, 0, len(versions))
	for dep := range versions {
		deps = append(deps, dep)
	}
	sort.Strings(deps)
	for _, dep := range deps {
		if len(versions[dep]) > 1 {
			t.Errorf("%s is required at different versions: %v (align them: go work sync, then go mod tidy in each module with GOWORK=off)", dep, versions[dep])
		}
	}
}

// workspaceDirs returns the module directories a go.work file uses.
func workspaceDirs(t *testing.T, path string) []string {
	t.Helper()
	var dirs []string
	inUse := false
	for _, line := range fileLines(t, path) {
		switch {
		case line == "use (":
			inUse = true
		case inUse && line == ")":
			inUse = false
		case inUse && line != "":
			dirs = append(dirs, filepath.Clean(line))
		case strings.HasPrefix(line, "use "):
			dirs = append(dirs, filepath.Clean(strings.TrimPrefix(line, "use ")))
		}
	}
	return dirs
}

// moduleRequires returns the versions a go.mod file requires, by module
// path.
func moduleRequires(t *testing.T, path string) map[string]string {
	t.Helper()
	req := map[string]string{}
	inRequire := false
	for _, line := range fileLines(t, path) {
		if i := strings.Index(line, "//"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		switch {
		case line == "require (":
			inRequire = true
			continue
		case inRequire && line == ")":
			inRequire = false
			continue
		case strings.HasPrefix(line, "require "):
			line = strings.TrimPrefix(line, "require ")
		case !inRequire:
			continue
		}
		if f := strings.Fields(line); len(f) == 2 {
			req[f[0]] = f[1]
		}
	}
	if len(req) == 0 {
		t.Fatalf("%s: no requirement read", path)
	}
	return req
}

// fileLines returns the trimmed lines of a file.
func fileLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, strings.TrimSpace(sc.Text()))
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return lines
}
