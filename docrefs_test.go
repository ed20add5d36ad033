package redshard_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// TestDocOptionsReferences: every "Options.X" in the package's comments
// (not "Shard.Options.X", "redis.Options.X", ...) names a field or method
// of redshard.Options. Shard.Addr's comment once said "Options.Network",
// a field of the shard's own redis.Options (Shard.Options.Network).
func TestDocOptionsReferences(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	pkg, ok := pkgs["redshard"]
	if !ok {
		t.Fatalf("package redshard not found among %d packages", len(pkgs))
	}
	names := map[string]bool{}
	for _, f := range pkg.Files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					ts, ok := s.(*ast.TypeSpec)
					if !ok || ts.Name.Name != "Options" {
						continue
					}
					for _, fl := range ts.Type.(*ast.StructType).Fields.List {
						for _, n := range fl.Names {
							names[n.Name] = true
						}
					}
				}
			case *ast.FuncDecl:
				if d.Recv == nil || len(d.Recv.List) != 1 {
					continue
				}
				typ := d.Recv.List[0].Type
				if st, ok := typ.(*ast.StarExpr); ok {
					typ = st.X
				}
				if id, ok := typ.(*ast.Ident); ok && id.Name == "Options" {
					names[d.Name.Name] = true
				}
			}
		}
	}
	if !names["ShardOptions"] {
		t.Fatalf("Options' fields not found: %v", names)
	}
	ref := regexp.MustCompile(`(^|[^\w.])Options\.(\w+)`)
	checked := 0
	for path, f := range pkg.Files {
		for _, cg := range f.Comments {
			for _, m := range ref.FindAllStringSubmatch(cg.Text(), -1) {
				checked++
				if !names[m[2]] {
					t.Errorf("%s: a comment names Options.%s, which redshard.Options does not have (%s)",
						path, m[2], fset.Position(cg.Pos()))
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no Options.X reference found in the comments: the pattern is wrong")
	}
}
