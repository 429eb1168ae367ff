package locking_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

// One master needs no slice: New takes it alone, NewQuorum a list.
func TestNewTakesOneMaster(t *testing.T) {
	s := redistest.New(t)
	c, err := locking.New(s.TestClient(t), locking.WithFreshDeployment(), locking.WithMasterTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Quorum() != 1 {
		t.Fatalf("quorum of one master = %d", c.Quorum())
	}
	ctx := testCtx(t)
	l, err := c.TryLock(ctx, "one", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	servers := redistest.NewN(t, 3)
	var ms []redis.UniversalClient
	for _, r := range clientsOf(t, servers...) {
		ms = append(ms, r)
	}
	q, err := locking.NewQuorum(ms, locking.WithFreshDeployment(), locking.WithMasterTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if q.Quorum() != 2 {
		t.Fatalf("quorum of three masters = %d", q.Quorum())
	}
	if l, err = q.TryLock(ctx, "three", time.Second); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// The package's exported API names no type of baton's internal packages:
// no exported function, method, field or type declaration refers to one.
func TestPublicAPIShowsNoInternalType(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		internal := map[string]bool{} // local names of internal imports
		for _, imp := range f.Imports {
			path := strings.Trim(imp.Path.Value, `"`)
			if strings.Contains(path, "/internal/") {
				local := path[strings.LastIndex(path, "/")+1:]
				if imp.Name != nil {
					local = imp.Name.Name
				}
				internal[local] = true
			}
		}
		check := func(what string, n ast.Node) {
			if n == nil {
				return
			}
			ast.Inspect(n, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if id, ok := sel.X.(*ast.Ident); ok && internal[id.Name] {
						t.Errorf("%s: %s names the internal type %s.%s", fset.Position(sel.Pos()), what, id.Name, sel.Sel.Name)
					}
				}
				return true
			})
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv != nil {
					recv := d.Recv.List[0].Type
					if st, ok := recv.(*ast.StarExpr); ok {
						recv = st.X
					}
					if id, ok := recv.(*ast.Ident); ok && !id.IsExported() {
						continue
					}
				}
				check(d.Name.Name, d.Type)
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					switch sp := sp.(type) {
					case *ast.TypeSpec:
						if !sp.Name.IsExported() {
							continue
						}
						if st, ok := sp.Type.(*ast.StructType); ok {
							for _, fl := range st.Fields.List {
								for _, n := range fl.Names {
									if n.IsExported() {
										check(sp.Name.Name+"."+n.Name, fl.Type)
									}
								}
							}
							continue
						}
						check(sp.Name.Name, sp.Type)
					case *ast.ValueSpec:
						for _, n := range sp.Names {
							if n.IsExported() {
								check(n.Name, sp.Type)
							}
						}
					}
				}
			}
		}
	}
}
