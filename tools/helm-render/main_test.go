package main

import (
	"reflect"
	"strings"
	"testing"
)

func TestApplySet(t *testing.T) {
	cases := []struct {
		expr     string
		asString bool
		want     map[string]interface{}
	}{
		{"a.b=1", false, map[string]interface{}{"a": map[string]interface{}{"b": 1}}},
		{"a.b=1", true, map[string]interface{}{"a": map[string]interface{}{"b": "1"}}},
		{"x=true,y=false,z=007", false, map[string]interface{}{"x": true, "y": false, "z": "007"}},
		{`c.d\.e=v\,w`, false, map[string]interface{}{"c": map[string]interface{}{"d.e": "v,w"}}},
		{"l={a,2}", false, map[string]interface{}{"l": []interface{}{"a", 2}}},
		{"e[1].name=N", false, map[string]interface{}{"e": []interface{}{nil, map[string]interface{}{"name": "N"}}}},
	}
	for _, c := range cases {
		got := map[string]interface{}{}
		if err := applySet(got, c.expr, c.asString); err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %#v, want %#v", c.expr, got, c.want)
		}
	}
	for _, bad := range []string{"novalue", "=1", "a[x]=1", "a..b=1"} {
		if err := applySet(map[string]interface{}{}, bad, false); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

func TestSetNullDeletes(t *testing.T) {
	m := map[string]interface{}{"a": map[string]interface{}{"b": 1, "c": 2}}
	if err := applySet(m, "a.b=null", false); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m, map[string]interface{}{"a": map[string]interface{}{"c": 2}}) {
		t.Errorf("got %#v", m)
	}
}

func TestMerge(t *testing.T) {
	dst := map[string]interface{}{
		"keep": 1, "gone": 2, "list": []interface{}{1, 2},
		"m": map[string]interface{}{"x": 1, "y": 2},
	}
	src := map[string]interface{}{
		"gone": nil, "list": []interface{}{3},
		"m": map[string]interface{}{"y": 3, "z": 4}, "new": "n",
	}
	want := map[string]interface{}{
		"keep": 1, "list": []interface{}{3},
		"m": map[string]interface{}{"x": 1, "y": 3, "z": 4}, "new": "n",
	}
	if got := merge(dst, src); !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v, want %#v", got, want)
	}
}

func TestSplitDocs(t *testing.T) {
	got := splitDocs("a: 1\n---\nb: 2\n--- \nc: 3\n")
	if len(got) != 3 || got[1] != "b: 2\n" || got[2] != "c: 3\n" {
		t.Errorf("got %q", got)
	}
}

func TestToYAML(t *testing.T) {
	got := toYAML(map[string]interface{}{"b": []interface{}{"x"}, "a": map[string]interface{}{"c": 1.0}})
	want := "a:\n  c: 1\nb:\n  - x"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestDescribe(t *testing.T) {
	var root interface{} = map[string]interface{}{
		"definitions": map[string]interface{}{"q": map[string]interface{}{"type": "string", "description": "a quantity"}},
		"properties": map[string]interface{}{
			"p": map[string]interface{}{"properties": map[string]interface{}{
				"size": map[string]interface{}{"$ref": "#/definitions/q"},
				"own":  map[string]interface{}{"$ref": "#/definitions/q", "description": "mine"},
			}},
			"l": map[string]interface{}{"items": map[string]interface{}{"properties": map[string]interface{}{
				"n": map[string]interface{}{"description": "a name"}}}},
		},
	}
	for field, want := range map[string]string{"p.size": "a quantity", "p.own": "mine", "l.0.n": "a name", "p.none": "", "(root)": ""} {
		if got := describe(root, field); got != want {
			t.Errorf("%s: got %q, want %q", field, got, want)
		}
	}
}

func TestRequiredAndTpl(t *testing.T) {
	e := &engine{}
	f := e.funcs()
	req := f["required"].(func(string, interface{}) (interface{}, error))
	if _, err := req("x is required", ""); err == nil || !strings.Contains(err.Error(), "x is required") {
		t.Errorf("required accepted an empty string: %v", err)
	}
	if _, err := req("x is required", nil); err == nil {
		t.Errorf("required accepted nil")
	}
	if v, err := req("m", 0.0); err != nil || v != 0.0 {
		t.Errorf("required refused 0")
	}
	if _, ok := f["env"]; ok {
		t.Errorf("env is available to templates")
	}
}
