package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
)

// jsonType is a Go type the CLI's --json output (or input) encodes.
type jsonType struct {
	title string // the section heading
	dir   string // the package's directory, relative to the module's root
	name  string // the type's name
	where string // the commands that print or read it
}

// jsonTypes are the types of the CLI's JSON, in the order the reference
// shows them. A command that prints a new type adds it here.
var jsonTypes = []jsonType{
	{"Job", "api", "Job", "`enqueue --json` and `show --json` print one; `list --json` prints an array of them (without `headers`, `result` and `history`)"},
	{"Job result", "api", "Result", "a job's `result`: the answer that ended it"},
	{"History event", "store", "Event", "each item of a job's `history`"},
	{"Header", "api", "WireHeader", "each item of a job's `headers` (values redacted), and of an enqueue line's `headers` array"},
	{"List page", "api", "ListPage", "`list --json-page`"},
	{"Bulk result", "api", "BulkResult", "`retry`, `cancel` and `resolve --all --json`; the admin API's `POST /v1/bulk` answer"},
	{"Enqueue line", "api", "EnqueueSpec", "each line of `enqueue --from`; the admin API's `POST /v1/jobs` body too"},
	{"Host", "cmd/idemrun", "hostJSON", "each item of `host list --json`"},
	{"Host policy", "cmd/idemrun", "policyJSON", "a host's `policy`"},
	{"Compact", "store/bolt", "CompactResult", "`compact --json`"},
	{"Demo", "internal/demo", "Summary", "`demo --json`"},
	{"Bench", "internal/bench", "Result", "`bench --json`"},
}

// renderJSON writes a table of each JSON type's fields: the name its tag
// gives, the Go type and the field's comment.
func renderJSON(b *bytes.Buffer, root string) error {
	b.WriteString("\n## JSON output\n\n")
	b.WriteString("Field names are a contract: fields are added, never renamed. `stats --json` prints an object of every state and its count. Times are RFC 3339; durations are Go duration strings (`\"10s\"`) unless the name says otherwise.\n")
	for _, t := range jsonTypes {
		fields, err := structFields(filepath.Join(root, t.dir), t.name)
		if err != nil {
			return err
		}
		fmt.Fprintf(b, "\n### %s\n\n%s (`%s.%s`).\n\n", t.title, upperFirst(t.where), filepath.Base(t.dir), t.name)
		b.WriteString("| field | type | meaning |\n|---|---|---|\n")
		for _, f := range fields {
			fmt.Fprintf(b, "| `%s` | `%s` | %s |\n", f.name, f.typ, f.doc)
		}
	}
	return nil
}

// field is one JSON field of a struct type.
type field struct{ name, typ, doc string }

// structFields parses the non-test Go files of dir and returns the JSON
// fields of the struct type name, in their order.
func structFields(dir, name string) ([]field, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		var st *ast.StructType
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok && ts.Name.Name == name {
				st, _ = ts.Type.(*ast.StructType)
				return false
			}
			return st == nil
		})
		if st != nil {
			return jsonFields(st), nil
		}
	}
	return nil, fmt.Errorf("no struct type %s in %s", name, dir)
}

// jsonFields lists the fields of st that encoding/json writes.
func jsonFields(st *ast.StructType) []field {
	var out []field
	for _, f := range st.Fields.List {
		tag, opts := "", ""
		if f.Tag != nil {
			s, _ := strconv.Unquote(f.Tag.Value)
			tag, opts, _ = strings.Cut(reflect.StructTag(s).Get("json"), ",")
		}
		if tag == "-" || len(f.Names) == 0 {
			continue
		}
		doc := f.Doc.Text()
		if doc == "" {
			doc = f.Comment.Text()
		}
		doc = strings.ReplaceAll(strings.Join(strings.Fields(doc), " "), "|", `\|`)
		if strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero") {
			doc = strings.TrimSpace(doc + " (Left out when empty.)")
		}
		for _, n := range f.Names {
			if !n.IsExported() {
				continue
			}
			name := tag
			if name == "" {
				name = n.Name
			}
			out = append(out, field{name: name, typ: types.ExprString(f.Type), doc: doc})
		}
	}
	return out
}
