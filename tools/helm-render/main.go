// helm-render renders a Helm chart the way `helm template` does, for the
// parts of Helm that helm/strata uses: values.yaml merged with -f files and
// --set / --set-string, values.schema.json validated before rendering,
// .Values / .Release / .Chart / .Capabilities / .Template, the sprig
// functions, and Helm's own include, tpl, required, toYaml, fromYaml,
// toJson and lookup (always empty: there is no cluster).  It is built from
// Debian's Go packages only (text/template, sprig, yaml.v3, gojsonschema).
//
//	helm-render [--name NAME] [--namespace NS] [-f FILE]... [--set K=V]...
//	            [--set-string K=V]... [--notes] [--show-values] CHART_DIR
//
// Exit status: 0 rendered, 1 the values or a template are wrong (the reason
// on stderr), 2 bad usage.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"github.com/Masterminds/semver"
	"github.com/Masterminds/sprig"
	"github.com/xeipuuv/gojsonschema"
	"gopkg.in/yaml.v3"
)

type options struct {
	name, namespace string
	files           []string
	sets            []string // "s:" or "v:" then the --set text
	notes           bool
	showValues      bool
	chart           string
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: helm-render [--name NAME] [--namespace NS] [-f FILE]... [--set K=V]... [--set-string K=V]... [--notes] [--show-values] CHART_DIR")
	os.Exit(2)
}

func parseArgs(args []string) options {
	o := options{name: "release-name", namespace: "default"}
	for i := 0; i < len(args); i++ {
		a := args[i]
		val := func() string {
			if j := strings.IndexByte(a, '='); j > 0 && strings.HasPrefix(a, "--") {
				return a[j+1:]
			}
			i++
			if i >= len(args) {
				fmt.Fprintf(os.Stderr, "helm-render: %s needs a value\n", a)
				usage()
			}
			return args[i]
		}
		flag := a
		if j := strings.IndexByte(a, '='); j > 0 && strings.HasPrefix(a, "--") {
			flag = a[:j]
		}
		switch flag {
		case "--name":
			o.name = val()
		case "-n", "--namespace":
			o.namespace = val()
		case "-f", "--values":
			o.files = append(o.files, val())
		case "--set":
			o.sets = append(o.sets, "v:"+val())
		case "--set-string":
			o.sets = append(o.sets, "s:"+val())
		case "--notes":
			o.notes = true
		case "--show-values":
			o.showValues = true
		case "-h", "--help":
			usage()
		default:
			if strings.HasPrefix(a, "-") || o.chart != "" {
				fmt.Fprintf(os.Stderr, "helm-render: unexpected argument %q\n", a)
				usage()
			}
			o.chart = a
		}
	}
	if o.chart == "" {
		usage()
	}
	return o
}

func main() {
	o := parseArgs(os.Args[1:])
	out, err := render(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error: %v\n", err)
		os.Exit(1)
	}
	os.Stdout.WriteString(out)
}

// ---- values -------------------------------------------------------------

func readYAMLMap(file string) (map[string]interface{}, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	m := map[string]interface{}{}
	if err := yaml.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	if m == nil {
		m = map[string]interface{}{}
	}
	return m, nil
}

// merge lays src over dst as Helm coalesces user values over a chart's:
// maps merge key by key, anything else replaces, and a null removes the key.
func merge(dst, src map[string]interface{}) map[string]interface{} {
	for k, v := range src {
		if v == nil {
			delete(dst, k)
			continue
		}
		sm, sok := v.(map[string]interface{})
		dm, dok := dst[k].(map[string]interface{})
		if sok && dok {
			dst[k] = merge(dm, sm)
		} else {
			dst[k] = v
		}
	}
	return dst
}

// splitUnescaped splits s at sep where sep is not preceded by a backslash.
func splitUnescaped(s string, sep byte) []string {
	var parts []string
	var cur strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			cur.WriteByte(s[i+1])
			i++
			continue
		}
		if s[i] == sep {
			parts = append(parts, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteByte(s[i])
	}
	return append(parts, cur.String())
}

func typedValue(s string, asString bool) interface{} {
	if asString {
		return s
	}
	switch s {
	case "true":
		return true
	case "false":
		return false
	case "null":
		return nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && (s == "0" || !strings.HasPrefix(s, "0")) {
		return int(n)
	}
	return s
}

// applySet applies one --set expression (a.b[0].c=v, several separated by
// commas, a list as {x,y}) to vals.
func applySet(vals map[string]interface{}, expr string, asString bool) error {
	// commas inside {...} belong to the list
	var items []string
	depth, start := 0, 0
	for i := 0; i < len(expr); i++ {
		switch expr[i] {
		case '\\':
			i++
		case '{':
			depth++
		case '}':
			depth--
		case ',':
			if depth == 0 {
				items = append(items, expr[start:i])
				start = i + 1
			}
		}
	}
	items = append(items, expr[start:])
	for _, item := range items {
		eq := strings.IndexByte(item, '=')
		if eq <= 0 {
			return fmt.Errorf("--set %q: expected key=value", item)
		}
		key, raw := item[:eq], item[eq+1:]
		var v interface{}
		if !asString && strings.HasPrefix(raw, "{") && strings.HasSuffix(raw, "}") {
			var list []interface{}
			if inner := raw[1 : len(raw)-1]; inner != "" {
				for _, e := range splitUnescaped(inner, ',') {
					list = append(list, typedValue(e, false))
				}
			}
			v = list
		} else {
			v = typedValue(strings.Join(splitUnescaped(raw, ','), ","), asString)
		}
		if err := setPath(vals, splitUnescaped(key, '.'), v, key); err != nil {
			return err
		}
	}
	return nil
}

func setPath(m map[string]interface{}, keys []string, v interface{}, whole string) error {
	k := keys[0]
	idx := -1
	if b := strings.IndexByte(k, '['); b > 0 && strings.HasSuffix(k, "]") {
		n, err := strconv.Atoi(k[b+1 : len(k)-1])
		if err != nil || n < 0 || n > 65535 {
			return fmt.Errorf("--set %s: bad list index in %q", whole, k)
		}
		k, idx = k[:b], n
	}
	if k == "" {
		return fmt.Errorf("--set %s: empty key", whole)
	}
	last := len(keys) == 1
	if idx < 0 {
		if last {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = v
			}
			return nil
		}
		child, ok := m[k].(map[string]interface{})
		if !ok {
			child = map[string]interface{}{}
			m[k] = child
		}
		return setPath(child, keys[1:], v, whole)
	}
	list, _ := m[k].([]interface{})
	for len(list) <= idx {
		list = append(list, nil)
	}
	m[k] = list
	if last {
		list[idx] = v
		return nil
	}
	child, ok := list[idx].(map[string]interface{})
	if !ok {
		child = map[string]interface{}{}
		list[idx] = child
	}
	return setPath(child, keys[1:], v, whole)
}

// validate checks vals against the chart's values.schema.json, if any.
func validate(chartDir, chartName string, vals map[string]interface{}) error {
	schema, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	// through JSON, so that numbers and maps are what a JSON schema sees
	doc, err := json.Marshal(vals)
	if err != nil {
		return fmt.Errorf("values: %v", err)
	}
	res, err := gojsonschema.Validate(gojsonschema.NewBytesLoader(schema), gojsonschema.NewBytesLoader(doc))
	if err != nil {
		return fmt.Errorf("values.schema.json: %v", err)
	}
	if res.Valid() {
		return nil
	}
	var root interface{}
	_ = json.Unmarshal(schema, &root)
	var b strings.Builder
	fmt.Fprintf(&b, "values don't meet the specifications of the schema(s) in the following chart(s):\n%s:\n", chartName)
	msgs := []string{}
	fields := map[string]int{}
	for _, e := range res.Errors() {
		fields[e.Field()]++
	}
	for _, e := range res.Errors() {
		// these repeat what the errors of their branches say
		switch e.Type() {
		case "number_any_of", "number_one_of", "number_all_of", "condition_then", "condition_else":
			continue
		}
		if e.Type() == "number_not" && fields[e.Field()] > 1 {
			continue // the propertyNames error of the same key says it
		}
		msg := fmt.Sprintf("- %s: %s", e.Field(), e.Description())
		// the value, unless it may be a credential someone put where it
		// must not be (an unknown key, a credentials setting)
		switch v := e.Value().(type) {
		case map[string]interface{}, []interface{}:
		default:
			if e.Type() != "additional_property_not_allowed" && !strings.Contains(strings.ToLower(e.Field()), "credential") {
				j, _ := json.Marshal(v)
				msg += fmt.Sprintf(" (got %s)", j)
			}
		}
		if d := describe(root, e.Field()); d != "" {
			msg += ": " + d
		}
		msgs = append(msgs, msg)
	}
	sort.Strings(msgs)
	b.WriteString(strings.Join(msgs, "\n"))
	return errors.New(b.String())
}

// describe finds the "description" of the schema node at field (a.b.0.c,
// as gojsonschema names it), following properties, additionalProperties,
// items and local $refs.
func describe(root interface{}, field string) string {
	node, _ := root.(map[string]interface{})
	resolve := func(n map[string]interface{}) map[string]interface{} {
		for i := 0; i < 8 && n != nil; i++ {
			ref, ok := n["$ref"].(string)
			if !ok || !strings.HasPrefix(ref, "#/") {
				break
			}
			var cur interface{} = root
			for _, p := range strings.Split(ref[2:], "/") {
				m, _ := cur.(map[string]interface{})
				cur = m[p]
			}
			n, _ = cur.(map[string]interface{})
		}
		return n
	}
	if field == "(root)" {
		return ""
	}
	for _, k := range strings.Split(field, ".") {
		node = resolve(node)
		if node == nil {
			return ""
		}
		if props, ok := node["properties"].(map[string]interface{}); ok && props[k] != nil {
			node, _ = props[k].(map[string]interface{})
		} else if items, ok := node["items"].(map[string]interface{}); ok {
			node = items
		} else if ap, ok := node["additionalProperties"].(map[string]interface{}); ok {
			node = ap
		} else {
			return ""
		}
	}
	if node == nil {
		return ""
	}
	if d, ok := node["description"].(string); ok {
		return d
	}
	if node = resolve(node); node != nil {
		d, _ := node["description"].(string)
		return d
	}
	return ""
}

// ---- chart --------------------------------------------------------------

func loadChart(dir string) (map[string]interface{}, error) {
	m, err := readYAMLMap(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return nil, err
	}
	c := map[string]interface{}{}
	for k, v := range m {
		switch k {
		case "apiVersion":
			c["APIVersion"] = v
		default:
			c[strings.ToUpper(k[:1])+k[1:]] = v
		}
	}
	name, _ := c["Name"].(string)
	if name == "" {
		return nil, errors.New("Chart.yaml: name is required")
	}
	if c["APIVersion"] != "v2" {
		return nil, errors.New("Chart.yaml: apiVersion must be v2")
	}
	ver, _ := c["Version"].(string)
	if _, err := semver.StrictNewVersion(ver); err != nil {
		return nil, fmt.Errorf("Chart.yaml: version %q is not semantic versioning: %v", ver, err)
	}
	return c, nil
}

// ---- template functions -------------------------------------------------

func toYAML(v interface{}) string {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return ""
	}
	enc.Close()
	return strings.TrimSuffix(b.String(), "\n")
}

func fromYAML(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func toJSON(v interface{}) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

type engine struct {
	root  *template.Template
	depth int
}

func (e *engine) funcs() template.FuncMap {
	f := sprig.TxtFuncMap()
	// Helm removes these: a chart must not depend on the environment
	delete(f, "env")
	delete(f, "expandenv")
	f["toYaml"] = toYAML
	f["fromYaml"] = fromYAML
	f["toJson"] = toJSON
	f["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil {
			return nil, errors.New(msg)
		}
		if s, ok := v.(string); ok && s == "" {
			return nil, errors.New(msg)
		}
		return v, nil
	}
	f["include"] = func(name string, data interface{}) (string, error) {
		if e.depth > 1000 {
			return "", fmt.Errorf("include %q: nested too deeply", name)
		}
		e.depth++
		defer func() { e.depth-- }()
		var b bytes.Buffer
		if err := e.root.ExecuteTemplate(&b, name, data); err != nil {
			return "", err
		}
		return b.String(), nil
	}
	f["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := e.root.Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Parse(text)
		if err != nil {
			return "", fmt.Errorf("tpl: %v", err)
		}
		var b bytes.Buffer
		if err := t.Execute(&b, data); err != nil {
			return "", fmt.Errorf("tpl: %v", err)
		}
		return strings.ReplaceAll(b.String(), "<no value>", ""), nil
	}
	f["lookup"] = func(apiVersion, kind, namespace, name string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil
	}
	return f
}

type apiVersions []string

// Has tells whether the (pretended) cluster serves apiVersion or
// apiVersion/Kind.
func (a apiVersions) Has(v string) bool {
	for _, x := range a {
		if x == v || strings.HasPrefix(v, x+"/") {
			return true
		}
	}
	return false
}

func render(o options) (string, error) {
	chart, err := loadChart(o.chart)
	if err != nil {
		return "", err
	}
	name := chart["Name"].(string)
	vals, err := readYAMLMap(filepath.Join(o.chart, "values.yaml"))
	if err != nil {
		return "", err
	}
	for _, f := range o.files {
		m, err := readYAMLMap(f)
		if err != nil {
			return "", err
		}
		vals = merge(vals, m)
	}
	for _, s := range o.sets {
		if err := applySet(vals, s[2:], s[0] == 's'); err != nil {
			return "", err
		}
	}
	// as Helm holds values: through JSON, so numbers are float64 (a
	// template that formats a number without int64 is caught here too)
	if b, err := json.Marshal(vals); err != nil {
		return "", fmt.Errorf("values: %v", err)
	} else if err := json.Unmarshal(b, &vals); err != nil {
		return "", fmt.Errorf("values: %v", err)
	}
	if err := validate(o.chart, name, vals); err != nil {
		return "", err
	}
	if o.showValues {
		return toYAML(vals) + "\n", nil
	}

	e := &engine{}
	e.root = template.New("gotpl").Option("missingkey=zero").Funcs(e.funcs())
	tdir := filepath.Join(o.chart, "templates")
	entries, err := os.ReadDir(tdir)
	if err != nil {
		return "", err
	}
	var names []string
	for _, ent := range entries {
		n := ent.Name()
		if ent.IsDir() || !(strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml") ||
			strings.HasSuffix(n, ".tpl") || n == "NOTES.txt") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(tdir, n))
		if err != nil {
			return "", err
		}
		full := path.Join(name, "templates", n)
		if _, err := e.root.New(full).Parse(string(b)); err != nil {
			return "", err
		}
		names = append(names, n)
	}
	sort.Strings(names)

	caps := map[string]interface{}{
		"KubeVersion": map[string]interface{}{"Version": "v1.28.0", "Major": "1", "Minor": "28",
			"GitVersion": "v1.28.0"},
		"APIVersions": apiVersions{"v1", "apps/v1", "policy/v1", "rbac.authorization.k8s.io/v1"},
		"HelmVersion": map[string]interface{}{"Version": "v3.14.0"},
	}
	release := map[string]interface{}{"Name": o.name, "Namespace": o.namespace, "Service": "Helm",
		"IsInstall": true, "IsUpgrade": false, "Revision": 1}
	var out strings.Builder
	for _, n := range names {
		if strings.HasPrefix(n, "_") || (n == "NOTES.txt") != o.notes {
			continue
		}
		full := path.Join(name, "templates", n)
		data := map[string]interface{}{
			"Values": vals, "Release": release, "Chart": chart, "Capabilities": caps,
			"Template": map[string]interface{}{"Name": full, "BasePath": path.Join(name, "templates")},
		}
		var b bytes.Buffer
		if err := e.root.ExecuteTemplate(&b, full, data); err != nil {
			return "", err
		}
		text := strings.ReplaceAll(b.String(), "<no value>", "")
		if o.notes {
			out.WriteString(text)
			continue
		}
		for _, doc := range splitDocs(text) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var probe interface{}
			if err := yaml.Unmarshal([]byte(doc), &probe); err != nil {
				return "", fmt.Errorf("%s: the rendered output is not YAML: %v\n%s", full, err, doc)
			}
			fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", full, strings.TrimSpace(doc))
		}
	}
	return out.String(), nil
}

// splitDocs splits a rendered template at its "---" document separators.
func splitDocs(s string) []string {
	var docs []string
	var cur strings.Builder
	for _, line := range strings.SplitAfter(s, "\n") {
		if strings.TrimRight(line, " \t\r\n") == "---" {
			docs = append(docs, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteString(line)
	}
	return append(docs, cur.String())
}
