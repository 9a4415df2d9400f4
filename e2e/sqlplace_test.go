package e2e_test

import (
	"go/ast"
	"go/types"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/tools/go/packages"
)

// SQL is written in store, and in the kit's transaction helper
// (internal/kit/sqltx): every other package asks store. A call that sends a
// statement on a *gorm.DB, or on database/sql's DB, Conn or Tx, anywhere
// else outside tests is refused. The bench's raw MySQL baseline, which
// times the server itself on a table of its own, is the one exception.
func TestSQLOnlyInStore(t *testing.T) {
	t.Parallel()
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo, Dir: ".."}
	pkgs, err := packages.Load(cfg, "./...")
	require.NoError(t, err)
	sends := map[string]bool{
		"Raw": true, "Exec": true, "Find": true, "First": true, "Take": true, "Last": true, "Scan": true, "Count": true,
		"Pluck": true, "Create": true, "CreateInBatches": true, "Save": true, "Update": true, "Updates": true,
		"UpdateColumn": true, "UpdateColumns": true, "Delete": true, "Row": true, "Rows": true, "FirstOrCreate": true,
		"FirstOrInit": true, "FindInBatches": true, "ScanRows": true, "AutoMigrate": true,
		"ExecContext": true, "Query": true, "QueryContext": true, "QueryRow": true, "QueryRowContext": true,
		"Prepare": true, "PrepareContext": true,
	}
	receivers := []string{"gorm.io/gorm.DB", "database/sql.DB", "database/sql.Conn", "database/sql.Tx"}
	allowed := func(pkg, file, fn string) bool {
		switch {
		case pkg == "store" || strings.HasPrefix(pkg, "store/") || pkg == "internal/kit/sqltx":
			return true
		case pkg == "cmd/islectl/internal/bench" && file == "services.go" && fn == "mysqlBatch":
			return true
		}
		return false
	}
	checked := 0
	var found []string
	for _, p := range pkgs {
		require.Empty(t, p.Errors, "package %s", p.PkgPath)
		pkg := strings.TrimPrefix(p.PkgPath, module)
		for _, f := range p.Syntax {
			file := filepath.Base(p.Fset.File(f.Pos()).Name())
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			checked++
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil || allowed(pkg, file, fd.Name.Name) {
					continue
				}
				ast.Inspect(fd.Body, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					sel, ok := call.Fun.(*ast.SelectorExpr)
					if !ok || !sends[sel.Sel.Name] {
						return true
					}
					s := p.TypesInfo.Selections[sel]
					if s == nil || s.Kind() != types.MethodVal {
						return true
					}
					recv := s.Recv()
					if ptr, ok := recv.(*types.Pointer); ok {
						recv = ptr.Elem()
					}
					named, ok := recv.(*types.Named)
					if !ok || named.Obj().Pkg() == nil {
						return true
					}
					if slices.Contains(receivers, named.Obj().Pkg().Path()+"."+named.Obj().Name()) {
						found = append(found, p.Fset.Position(call.Pos()).String()+": "+sel.Sel.Name)
					}
					return true
				})
			}
		}
	}
	require.Greater(t, checked, 100, "the module's files were read")
	require.Empty(t, found, "SQL outside store: make these store calls")
}
