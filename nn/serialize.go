package nn

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/headroom-ml/headroom/tensor"
)

// Model serialization: a model's architecture as JSON, so that a saved
// model loads alone (Keras' model.to_json and model_from_json).
//
// Every layer type and initializer is registered under a name, one line
// per type beside its definition:
//
//	var _ = RegisterLayer("Dense", &Dense{})
//
// A value is written as {"type": name, "config": {...}} where config holds
// the exported fields of the struct by their Go names: numbers, strings,
// shapes (lists), dtypes (their names, "float32"), and, for a field of an
// interface type (an initializer, a layer a layer wraps), the registered
// value it holds, nested the same way. A field tagged `json:"-"` is left
// out and comes back as its zero value. Sequential models are their
// fields; a Functional model lists its inputs, its layers (each once,
// shared layers too), the calls in order and its outputs. A ModelFunc is
// Go code and cannot be written.

// ModelFormat names the JSON MarshalModel writes; ModelFormatVersion is
// its version.
const (
	ModelFormat        = "headroom.model"
	ModelFormatVersion = 1
)

// serializable maps a registered name to its type, and back.
var (
	typeByName = map[string]reflect.Type{}
	nameByType = map[reflect.Type]string{}
)

// RegisterLayer makes layers of proto's type (a pointer to a struct that
// is a Layer or a MultiLayer) serializable under name; it returns true so
// that a registration is one line: var _ = RegisterLayer("Dense", &Dense{}).
// It panics on a name or type registered twice or a proto that is not a
// layer (programming errors).
func RegisterLayer(name string, proto any) bool {
	switch proto.(type) {
	case Layer, MultiLayer:
	default:
		panic(fmt.Sprintf("nn: RegisterLayer(%q, %T): not a Layer or MultiLayer", name, proto))
	}
	return register(name, proto)
}

// RegisterModelType makes models of proto's type serializable under name,
// as RegisterLayer does for layers: a model written in Go whose
// configuration is its exported fields (GPT, LSTMLM), so that a model file
// rebuilds it as it was trained, whatever its sizes.
func RegisterModelType(name string, proto Model) bool { return register(name, proto) }

// RegisterInitializer makes initializers of proto's type serializable
// under name, as RegisterLayer does for layers.
func RegisterInitializer(name string, proto Initializer) bool { return register(name, proto) }

func register(name string, proto any) bool {
	t := reflect.TypeOf(proto)
	if _, ok := typeByName[name]; ok {
		panic("nn: type name " + name + " registered twice")
	}
	if _, ok := nameByType[t]; ok {
		panic(fmt.Sprintf("nn: type %v registered twice", t))
	}
	typeByName[name], nameByType[t] = t, name
	return true
}

// RegisteredTypes returns the registered names, sorted.
func RegisteredTypes() []string {
	out := make([]string, 0, len(typeByName))
	for n := range typeByName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// The types of package nn.
var (
	_ = RegisterLayer("Dense", &Dense{})
	_ = RegisterLayer("Conv2D", &Conv2D{})
	_ = RegisterLayer("Pool2D", &Pool2D{})
	_ = RegisterLayer("GlobalAveragePooling2D", &GlobalAveragePooling2D{})
	_ = RegisterLayer("Flatten", &Flatten{})
	_ = RegisterLayer("Dropout", &Dropout{})
	_ = RegisterLayer("Embedding", &Embedding{})
	_ = RegisterLayer("BatchNormalization", &BatchNormalization{})
	_ = RegisterLayer("LayerNormalization", &LayerNormalization{})
	_ = RegisterLayer("Activation", &Activation{})
	_ = RegisterLayer("Add", &Add{})
	_ = RegisterLayer("Subtract", &Subtract{})
	_ = RegisterLayer("Multiply", &Multiply{})
	_ = RegisterLayer("Average", &Average{})
	_ = RegisterLayer("Maximum", &Maximum{})
	_ = RegisterLayer("Minimum", &Minimum{})
	_ = RegisterLayer("Concatenate", &Concatenate{})
	_ = RegisterLayer("Dot", &Dot{})
	_ = RegisterLayer("Functional", &Functional{})
	_ = register("Sequential", &Sequential{})

	_ = RegisterInitializer("GlorotUniform", GlorotUniform{})
	_ = RegisterInitializer("HeNormal", HeNormal{})
	_ = RegisterInitializer("Constant", Constant{})
	_ = RegisterInitializer("Uniform", Uniform{})
)

// typed is how a registered value is written.
type typed struct {
	Type   string          `json:"type"`
	Config json.RawMessage `json:"config"`
}

// modelJSON is the document MarshalModel writes.
type modelJSON struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	Model   typed  `json:"model"`
}

// MarshalModel returns m's architecture as JSON (no weights): a Sequential
// or Functional model of registered layers. Its error names the layer or
// field that cannot be written.
func MarshalModel(m Model) ([]byte, error) {
	v, err := encodeTyped(reflect.ValueOf(m), "model")
	if err != nil {
		return nil, err
	}
	return json.Marshal(modelJSON{Format: ModelFormat, Version: ModelFormatVersion, Model: *v})
}

// LoadModel builds the model whose architecture MarshalModel wrote (Keras'
// model_from_json). Errors name the layer and field at fault; the model is
// built once at batch 1, so one that does not fit its input is an error
// here, not a panic later.
func LoadModel(b []byte) (m Model, err error) {
	defer func() {
		if r := recover(); r != nil { // a layer's configuration its code did not expect
			m, err = nil, fmt.Errorf("nn: the model JSON describes a model that does not build: %v", r)
		}
	}()
	var doc struct {
		Format  string          `json:"format"`
		Version int             `json:"version"`
		Model   json.RawMessage `json:"model"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("nn: model JSON: %w", err)
	}
	if doc.Format != ModelFormat {
		return nil, fmt.Errorf("nn: model JSON has format %q, want %q", doc.Format, ModelFormat)
	}
	if doc.Version < 1 || doc.Version > ModelFormatVersion {
		return nil, fmt.Errorf("nn: model JSON version %d: this build reads versions 1 to %d", doc.Version, ModelFormatVersion)
	}
	if len(doc.Model) == 0 {
		return nil, fmt.Errorf("nn: model JSON has no model")
	}
	if err := decodeInto(doc.Model, reflect.ValueOf(&m).Elem(), "model"); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("nn: model JSON has no model")
	}
	if _, _, err := Params(m); err != nil {
		return nil, fmt.Errorf("nn: the model JSON describes a model that does not build: %w", err)
	}
	return m, nil
}

// encodeTyped writes v (a registered type's value, or an interface holding
// one) as {"type", "config"}.
func encodeTyped(v reflect.Value, path string) (*typed, error) {
	for v.Kind() == reflect.Interface {
		v = v.Elem()
	}
	if !v.IsValid() {
		return nil, nil
	}
	name, ok := nameByType[v.Type()]
	if !ok {
		if v.Type() == reflect.TypeOf(&ModelFunc{}) {
			return nil, fmt.Errorf("nn: %s is a ModelFunc (Go code), which cannot be written: build the model as a Sequential or Functional model of registered layers", path)
		}
		return nil, fmt.Errorf("nn: %s has type %v, which is not registered (nn.RegisterLayer)", path, v.Type())
	}
	cfg, err := encodeValue(v, path)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("nn: %s: %w", path, err)
	}
	return &typed{Type: name, Config: raw}, nil
}

var (
	dtypeType      = reflect.TypeOf(tensor.DType(0))
	functionalType = reflect.TypeOf(&Functional{})
)

// encodeValue returns v as a value encoding/json writes.
func encodeValue(v reflect.Value, path string) (any, error) {
	if v.Type() == dtypeType {
		d := tensor.DType(v.Uint())
		if d == tensor.Invalid {
			return "", nil
		}
		return d.String(), nil
	}
	switch v.Kind() {
	case reflect.Interface:
		if v.IsNil() {
			return nil, nil
		}
		return encodeTyped(v, path)
	case reflect.Pointer:
		if v.IsNil() {
			return nil, nil
		}
		if f, ok := v.Interface().(*Functional); ok {
			return encodeFunctional(f, path)
		}
		return encodeValue(v.Elem(), path)
	case reflect.Struct:
		obj := map[string]any{}
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() || f.Tag.Get("json") == "-" {
				continue
			}
			x, err := encodeValue(v.Field(i), path+"."+f.Name)
			if err != nil {
				return nil, err
			}
			obj[f.Name] = x
		}
		return obj, nil
	case reflect.Slice:
		if v.IsNil() {
			return nil, nil
		}
		fallthrough
	case reflect.Array:
		list := make([]any, v.Len())
		for i := range list {
			x, err := encodeValue(v.Index(i), fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			list[i] = x
		}
		return list, nil
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return nil, fmt.Errorf("nn: %s: a map with %v keys cannot be written", path, v.Type().Key())
		}
		if v.IsNil() {
			return nil, nil
		}
		obj := map[string]any{}
		for it := v.MapRange(); it.Next(); {
			x, err := encodeValue(it.Value(), path+"["+it.Key().String()+"]")
			if err != nil {
				return nil, err
			}
			obj[it.Key().String()] = x
		}
		return obj, nil
	case reflect.Func, reflect.Chan, reflect.UnsafePointer, reflect.Complex64, reflect.Complex128:
		return nil, fmt.Errorf("nn: %s is a %v, which cannot be written", path, v.Kind())
	}
	return v.Interface(), nil // bool, numbers, strings
}

// decodeInto reads raw into v (settable).
func decodeInto(raw json.RawMessage, v reflect.Value, path string) error {
	if v.Type() == dtypeType {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("nn: %s: want a dtype name: %w", path, err)
		}
		if s == "" {
			v.SetUint(uint64(tensor.Invalid))
			return nil
		}
		d, err := tensor.ParseDType(s)
		if err != nil {
			return fmt.Errorf("nn: %s: %w", path, err)
		}
		v.SetUint(uint64(d))
		return nil
	}
	isNull := bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
	switch v.Kind() {
	case reflect.Interface:
		if isNull {
			v.SetZero()
			return nil
		}
		x, err := decodeTyped(raw, path)
		if err != nil {
			return err
		}
		if !x.Type().AssignableTo(v.Type()) {
			return fmt.Errorf("nn: %s: a %v is not a %v", path, x.Type(), v.Type())
		}
		v.Set(x)
		return nil
	case reflect.Pointer:
		if isNull {
			v.SetZero()
			return nil
		}
		if v.Type() == functionalType {
			f, err := decodeFunctional(raw, path)
			if err != nil {
				return err
			}
			v.Set(reflect.ValueOf(f))
			return nil
		}
		p := reflect.New(v.Type().Elem())
		if err := decodeInto(raw, p.Elem(), path); err != nil {
			return err
		}
		v.Set(p)
		return nil
	case reflect.Struct:
		if isNull {
			v.SetZero()
			return nil
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil {
			return fmt.Errorf("nn: %s: want an object: %w", path, err)
		}
		t := v.Type()
		for _, key := range sortedNames(obj) {
			f, ok := t.FieldByName(key)
			if !ok || !f.IsExported() || len(f.Index) != 1 || f.Tag.Get("json") == "-" {
				return fmt.Errorf("nn: %s: %v has no field %q", path, t, key)
			}
			if err := decodeInto(obj[key], v.FieldByIndex(f.Index), path+"."+key); err != nil {
				return err
			}
		}
		return nil
	case reflect.Slice:
		if isNull {
			v.SetZero()
			return nil
		}
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return fmt.Errorf("nn: %s: want a list: %w", path, err)
		}
		s := reflect.MakeSlice(v.Type(), len(list), len(list))
		for i, x := range list {
			if err := decodeInto(x, s.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	case reflect.Array:
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return fmt.Errorf("nn: %s: want a list: %w", path, err)
		}
		if len(list) != v.Len() {
			return fmt.Errorf("nn: %s: %d values, want %d", path, len(list), v.Len())
		}
		for i, x := range list {
			if err := decodeInto(x, v.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	case reflect.Map:
		if isNull {
			v.SetZero()
			return nil
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil {
			return fmt.Errorf("nn: %s: want an object: %w", path, err)
		}
		m := reflect.MakeMapWithSize(v.Type(), len(obj))
		for _, key := range sortedNames(obj) {
			x := reflect.New(v.Type().Elem()).Elem()
			if err := decodeInto(obj[key], x, path+"["+key+"]"); err != nil {
				return err
			}
			m.SetMapIndex(reflect.ValueOf(key).Convert(v.Type().Key()), x)
		}
		v.Set(m)
		return nil
	}
	if err := json.Unmarshal(raw, v.Addr().Interface()); err != nil {
		return fmt.Errorf("nn: %s: %w", path, err)
	}
	return nil
}

// decodeTyped reads {"type", "config"} into a new value of the registered
// type.
func decodeTyped(raw json.RawMessage, path string) (reflect.Value, error) {
	var tv typed
	if err := json.Unmarshal(raw, &tv); err != nil {
		return reflect.Value{}, fmt.Errorf("nn: %s: want {\"type\", \"config\"}: %w", path, err)
	}
	t, ok := typeByName[tv.Type]
	if !ok {
		return reflect.Value{}, fmt.Errorf("nn: %s: unknown type %q (registered: %s)", path, tv.Type, strings.Join(RegisteredTypes(), ", "))
	}
	if len(tv.Config) == 0 {
		tv.Config = json.RawMessage("{}")
	}
	where := path + "(" + tv.Type + ")"
	x := reflect.New(t).Elem()
	if err := decodeInto(tv.Config, x, where); err != nil {
		return reflect.Value{}, err
	}
	return x, nil
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
