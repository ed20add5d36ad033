package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"path"
	"slices"
	"strings"
)

// The rewrite is mechanical and applied to the temporary copy only. It has
// two parts.
//
// Spec files (commands_test.go, pipeline_test.go, ...):
//
//	redis.NewClient(args)  ->  newSubjectClient(args)
//	*redis.Client (a type) ->  *subjectClient
//
// The shim compiled next to them defines subjectClient and newSubjectClient:
// for the plain baseline subjectClient = redis.Client and newSubjectClient
// is redis.NewClient (only Protocol is filled in); for redshard
// subjectClient = redshard.Client and newSubjectClient builds a redshard
// client over the run's shards from the same *redis.Options. The baseline
// therefore runs the same rewritten text, with the aliases resolving to
// go-redis itself.
//
// main_test.go (the suite's helpers): the BeforeSuite and AfterSuite, which
// connect to fixed ports (6379 for the server under test, ring, sentinel
// and cluster ports) are removed, together with the declarations only they
// used (cluster, tlsCluster, initializeTLSCluster, cleanupTLSCluster); the
// shim's own BeforeSuite points the suite at the runner's server instead.
// The *redis.Client types of the helpers that take the specs' client
// (mainRetype) become *subjectClient, as in the spec files. Everything else
// is kept as it is; imports left unused by the removals are dropped.

// mainDrops are the top-level declarations removed from main_test.go.
// redisSecondaryPort, the fixed 6381 that the MIGRATE spec writes to, is
// redeclared by the shim as a port the runner found closed, so the suite
// never writes to a server it did not start.
var mainDrops = []string{"cluster", "tlsCluster", "initializeTLSCluster", "cleanupTLSCluster", "redisSecondaryPort"}

// mainRetype are the functions of main_test.go whose *redis.Client types
// become *subjectClient.
var mainRetype = []string{"newUniversalSubject", "skipIfClientTrackingUnavailable", "probeClientTracking"}

// rewriteStats counts what a rewrite changed, so the runner can check that
// it did what the documentation says (a new go-redis layout would show as
// zero counts rather than as a silently unchanged suite).
type rewriteStats struct {
	Constructors int // redis.NewClient calls replaced
	Types        int // *redis.Client types replaced
	Dropped      int // declarations removed
}

// rewriteSpecFile applies the spec-file rules to src.
func rewriteSpecFile(name string, src []byte) ([]byte, rewriteStats, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
	if err != nil {
		return nil, rewriteStats{}, err
	}
	redisName := importName(f, goRedisModule, "redis")
	var st rewriteStats
	retype(f, redisName, &st)
	reconstruct(f, redisName, &st)
	out, err := printFile(fset, f)
	return out, st, err
}

// rewriteMainFile applies the main_test.go rules to src.
func rewriteMainFile(name string, src []byte) ([]byte, rewriteStats, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
	if err != nil {
		return nil, rewriteStats{}, err
	}
	redisName := importName(f, goRedisModule, "redis")
	var st rewriteStats
	var decls []ast.Decl
	for _, d := range f.Decls {
		if dropMainDecl(d) {
			st.Dropped++
			dropComments(f, d)
			continue
		}
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && slices.Contains(mainRetype, fd.Name.Name) {
			retype(fd, redisName, &st)
		}
		decls = append(decls, d)
	}
	f.Decls = decls
	pruneImports(f, true)
	out, err := printFile(fset, f)
	return out, st, err
}

// extractDecls keeps, of the file src, only the top-level functions and
// types named in names (helpers a spec file uses from a file whose own
// specs are not run), and drops the imports nothing else uses.
func extractDecls(name string, src []byte, names []string) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	found := map[string]bool{}
	var decls []ast.Decl
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil && slices.Contains(names, d.Name.Name) {
				found[d.Name.Name] = true
				decls = append(decls, d)
				continue
			}
		case *ast.GenDecl:
			if d.Tok == token.IMPORT {
				decls = append(decls, d)
				continue
			}
			if d.Tok == token.TYPE && len(d.Specs) == 1 && slices.Contains(names, d.Specs[0].(*ast.TypeSpec).Name.Name) {
				found[d.Specs[0].(*ast.TypeSpec).Name.Name] = true
				decls = append(decls, d)
				continue
			}
		}
		dropComments(f, d)
	}
	for _, n := range names {
		if !found[n] {
			return nil, fmt.Errorf("%s declares no %s", name, n)
		}
	}
	f.Decls = decls
	pruneImports(f, false)
	return printFile(fset, f)
}

// dropMainDecl reports whether d is one of the declarations of main_test.go
// the runner replaces: `var _ = BeforeSuite(...)`, `var _ = AfterSuite(...)`
// and the names in mainDrops.
func dropMainDecl(d ast.Decl) bool {
	switch d := d.(type) {
	case *ast.FuncDecl:
		return d.Recv == nil && slices.Contains(mainDrops, d.Name.Name)
	case *ast.GenDecl:
		if d.Tok != token.VAR && d.Tok != token.CONST || len(d.Specs) != 1 {
			return false
		}
		vs := d.Specs[0].(*ast.ValueSpec)
		if len(vs.Names) == 1 && slices.Contains(mainDrops, vs.Names[0].Name) {
			return true
		}
		if d.Tok != token.VAR {
			return false
		}
		if len(vs.Names) != 1 || vs.Names[0].Name != "_" || len(vs.Values) != 1 {
			return false
		}
		call, ok := vs.Values[0].(*ast.CallExpr)
		if !ok {
			return false
		}
		id, ok := call.Fun.(*ast.Ident)
		return ok && (id.Name == "BeforeSuite" || id.Name == "AfterSuite")
	}
	return false
}

// dropComments removes the comments inside d (and its doc comment) from f,
// so the printer does not leave them stranded.
func dropComments(f *ast.File, d ast.Decl) {
	start, end := d.Pos(), d.End()
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Doc != nil {
			start = d.Doc.Pos()
		}
	case *ast.GenDecl:
		if d.Doc != nil {
			start = d.Doc.Pos()
		}
	}
	f.Comments = slices.DeleteFunc(f.Comments, func(c *ast.CommentGroup) bool {
		return c.Pos() >= start && c.End() <= end
	})
}

// retype replaces every *redis.Client type under n by *subjectClient.
func retype(n ast.Node, redisName string, st *rewriteStats) {
	ast.Inspect(n, func(n ast.Node) bool {
		star, ok := n.(*ast.StarExpr)
		if ok && isSelector(star.X, redisName, "Client") {
			star.X = ast.NewIdent("subjectClient")
			st.Types++
		}
		return true
	})
}

// reconstruct replaces every redis.NewClient(...) call under n by
// newSubjectClient(...).
func reconstruct(n ast.Node, redisName string, st *rewriteStats) {
	ast.Inspect(n, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if ok && isSelector(call.Fun, redisName, "NewClient") {
			call.Fun = ast.NewIdent("newSubjectClient")
			st.Constructors++
		}
		return true
	})
}

// pruneImports removes the imports that the removed declarations were the
// only users of (Go rejects an unused import). Whether a dot import is used
// is not visible in the syntax: keepDot says whether to keep them.
func pruneImports(f *ast.File, keepDot bool) {
	used := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok {
				used[id.Name] = true
			}
		}
		return true
	})
	keep := func(imp *ast.ImportSpec) bool {
		if imp.Name != nil && imp.Name.Name == "_" {
			return true
		}
		if imp.Name != nil && imp.Name.Name == "." {
			return keepDot
		}
		p := strings.Trim(imp.Path.Value, `"`)
		name := path.Base(p)
		switch {
		case imp.Name != nil:
			name = imp.Name.Name
		case p == goRedisModule:
			name = "redis"
		}
		return used[name]
	}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.IMPORT {
			continue
		}
		gd.Specs = slices.DeleteFunc(gd.Specs, func(s ast.Spec) bool { return !keep(s.(*ast.ImportSpec)) })
	}
	f.Imports = slices.DeleteFunc(f.Imports, func(imp *ast.ImportSpec) bool { return !keep(imp) })
}

// isSelector reports whether e is pkg.name.
func isSelector(e ast.Expr, pkg, name string) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != name {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == pkg
}

// importName is the name f uses for the package at path (def when f imports
// it without a name, or not at all).
func importName(f *ast.File, path, def string) string {
	for _, imp := range f.Imports {
		if imp.Path.Value == fmt.Sprintf("%q", path) && imp.Name != nil {
			return imp.Name.Name
		}
	}
	return def
}

func printFile(fset *token.FileSet, f *ast.File) ([]byte, error) {
	var buf bytes.Buffer
	if err := format.Node(&buf, fset, f); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
