package nn

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/tensor"
)

// layerTypes lists, from the source of package nn (not its tests), the
// exported types with a method that makes them a layer (Forward, ForwardN)
// or an initializer (Fill).
func layerTypes(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{} // type -> method
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Recv == nil || len(fd.Recv.List) != 1 {
					continue
				}
				switch fd.Name.Name {
				case "Forward", "ForwardN", "Fill":
				default:
					continue
				}
				rt := fd.Recv.List[0].Type
				if s, ok := rt.(*ast.StarExpr); ok {
					rt = s.X
				}
				id, ok := rt.(*ast.Ident)
				if ok && ast.IsExported(id.Name) {
					found[id.Name] = fd.Name.Name
				}
			}
		}
	}
	return found
}

// TestEveryLayerTypeRegistered fails when a layer or initializer type of
// package nn (one other helpers add later too) has no RegisterLayer or
// RegisterInitializer line: such a model could be trained but not saved.
func TestEveryLayerTypeRegistered(t *testing.T) {
	registered := map[string]bool{}
	for _, typ := range typeByName {
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		if typ.PkgPath() == reflect.TypeOf(Dense{}).PkgPath() {
			registered[typ.Name()] = true
		}
	}
	found := layerTypes(t)
	if len(found) < 15 {
		t.Fatalf("found %d layer types in the source, want at least 15 (is the parse broken?): %v", len(found), found)
	}
	for name, method := range found {
		if !registered[name] {
			t.Errorf("type %s has a %s method but is not registered: add `var _ = RegisterLayer(%q, &%s{})` (or RegisterInitializer) beside it", name, method, name, name)
		}
	}
}

// fill sets every exported field of v to a value that is not its zero
// value, chosen from seed, so that a round trip that dropped a field
// would be seen. Interface fields get a registered type that fits.
func fill(t *testing.T, v reflect.Value, seed int, depth int) {
	t.Helper()
	if v.Type() == dtypeType {
		v.SetUint(uint64(tensor.Int32))
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(seed%5 + 2))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(seed%5 + 2))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(0.25 + float64(seed%7)/8)
	case reflect.String:
		v.SetString("s" + string(rune('a'+seed%26)))
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := 0; i < 2; i++ {
			fill(t, s.Index(i), seed+i+1, depth)
		}
		v.Set(s)
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			fill(t, v.Index(i), seed+i+1, depth)
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		fill(t, k, seed, depth)
		x := reflect.New(v.Type().Elem()).Elem()
		fill(t, x, seed+1, depth)
		m.SetMapIndex(k, x)
		v.Set(m)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(t, p.Elem(), seed, depth)
		v.Set(p)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if f.IsExported() && f.Tag.Get("json") != "-" {
				fill(t, v.Field(i), seed+i, depth)
			}
		}
	case reflect.Interface:
		if depth > 2 {
			return // leave deep nesting nil
		}
		for _, name := range RegisteredTypes() {
			typ := typeByName[name]
			if typ == functionalType || !typ.AssignableTo(v.Type()) {
				continue
			}
			x := reflect.New(typ).Elem()
			fill(t, x, seed+len(name), depth+1)
			v.Set(x)
			return
		}
		t.Fatalf("no registered type fits an interface field of type %v", v.Type())
	default:
		t.Fatalf("cannot fill a field of kind %v", v.Kind())
	}
}

// TestRoundTripEveryRegisteredType writes and reads back a value of every
// registered type (Functional has its own tests) with every field set,
// and wants it equal.
func TestRoundTripEveryRegisteredType(t *testing.T) {
	for _, name := range RegisteredTypes() {
		typ := typeByName[name]
		if typ == functionalType {
			continue
		}
		t.Run(name, func(t *testing.T) {
			x := reflect.New(typ).Elem()
			fill(t, x, 0, 0)
			tv, err := encodeTyped(x, name)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := json.Marshal(tv)
			if err != nil {
				t.Fatal(err)
			}
			back, err := decodeTyped(raw, name)
			if err != nil {
				t.Fatalf("reading back %s: %v", raw, err)
			}
			if !reflect.DeepEqual(back.Interface(), x.Interface()) {
				t.Errorf("round trip of %s:\n got %#v\nwant %#v", raw, back.Interface(), x.Interface())
			}
		})
	}
}

func TestRegisteredTypesSorted(t *testing.T) {
	names := RegisteredTypes()
	if !sort.StringsAreSorted(names) || len(names) != len(typeByName) {
		t.Errorf("RegisteredTypes() = %v: want every name, sorted", names)
	}
}
