package rest

import (
	"bytes"
	"fmt"
	"html/template"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/runnel/runnel/api"
)

// /docs: a self-contained HTML page rendered once from openapi.yaml at
// NewHandler time. No script, no CDN, no external font: it works offline.

type docsPage struct {
	Title, Version string
	Intro          template.HTML
	Tags           []docsTag
	Schemas        []docsSchema
	Problems       []api.ProblemKind
}

type docsTag struct {
	Name, Description string
	Ops               []docsOp
}

type docsOp struct {
	ID, Method, Path, Summary, Description string
	Params                                 []docsField
	Body                                   []docsContent
	Responses                              []docsResponse
}

type docsField struct {
	Name, In, Type, Description string
	Required                    bool
}

type docsContent struct {
	MediaType, Type string
}

type docsResponse struct {
	Status, Description string
	Content             []docsContent
}

type docsSchema struct {
	Name, Type, Description string
	Fields                  []docsField
}

func renderDocs(doc *openapi3.T) ([]byte, error) {
	page := docsPage{Title: doc.Info.Title, Version: doc.Info.Version, Problems: api.ProblemKinds()}
	page.Intro = mdHTML(doc.Info.Description)
	page.Tags = docsTags(doc)
	page.Schemas = docsSchemas(doc)
	tmpl, err := template.New("docs").Funcs(template.FuncMap{"lower": strings.ToLower, "md": mdHTML}).Parse(docsTemplate)
	if err != nil {
		return nil, fmt.Errorf("api: docs template: %w", err)
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, page); err != nil {
		return nil, fmt.Errorf("api: render docs: %w", err)
	}
	return buf.Bytes(), nil
}

func docsTags(doc *openapi3.T) []docsTag {
	var tags []docsTag
	index := map[string]int{}
	for _, t := range doc.Tags {
		index[t.Name] = len(tags)
		tags = append(tags, docsTag{Name: t.Name, Description: t.Description})
	}
	for _, path := range sortedKeys(doc.Paths.Map()) {
		item := doc.Paths.Value(path)
		for _, method := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
			op := item.GetOperation(method)
			if op == nil {
				continue
			}
			tag := "other"
			if len(op.Tags) > 0 {
				tag = op.Tags[0]
			}
			i, ok := index[tag]
			if !ok {
				i = len(tags)
				index[tag] = i
				tags = append(tags, docsTag{Name: tag})
			}
			tags[i].Ops = append(tags[i].Ops, docsOperation(method, path, item, op))
		}
	}
	return tags
}

func docsOperation(method, path string, item *openapi3.PathItem, op *openapi3.Operation) docsOp {
	d := docsOp{ID: op.OperationID, Method: method, Path: path, Summary: op.Summary, Description: op.Description}
	for _, pr := range append(slices.Clone(item.Parameters), op.Parameters...) {
		p := pr.Value
		d.Params = append(d.Params, docsField{Name: p.Name, In: p.In, Type: schemaType(p.Schema),
			Description: p.Description, Required: p.Required})
	}
	if op.RequestBody != nil && op.RequestBody.Value != nil {
		d.Body = docsContents(op.RequestBody.Value.Content)
	}
	for _, status := range sortedKeys(op.Responses.Map()) {
		rr := op.Responses.Value(status)
		if rr == nil || rr.Value == nil {
			continue
		}
		desc := ""
		if rr.Value.Description != nil {
			desc = *rr.Value.Description
		}
		d.Responses = append(d.Responses, docsResponse{Status: status, Description: desc, Content: docsContents(rr.Value.Content)})
	}
	return d
}

func docsContents(c openapi3.Content) []docsContent {
	var out []docsContent
	for _, mt := range sortedKeys(c) {
		out = append(out, docsContent{MediaType: mt, Type: schemaType(c[mt].Schema)})
	}
	return out
}

func docsSchemas(doc *openapi3.T) []docsSchema {
	var out []docsSchema
	for _, name := range sortedKeys(doc.Components.Schemas) {
		s := doc.Components.Schemas[name].Value
		ds := docsSchema{Name: name, Type: schemaType(&openapi3.SchemaRef{Value: s}), Description: s.Description}
		for _, prop := range sortedKeys(s.Properties) {
			ps := s.Properties[prop]
			desc := ""
			if ps.Value != nil {
				desc = ps.Value.Description
			}
			ds.Fields = append(ds.Fields, docsField{Name: prop, Type: schemaType(ps), Description: desc,
				Required: slices.Contains(s.Required, prop)})
		}
		out = append(out, ds)
	}
	return out
}

// schemaType is a one-line description of a schema: a reference name,
// "array of X", "map of X", or the type with its constraints.
func schemaType(sr *openapi3.SchemaRef) string {
	if sr == nil {
		return ""
	}
	if sr.Ref != "" {
		return sr.Ref[strings.LastIndex(sr.Ref, "/")+1:]
	}
	s := sr.Value
	if s == nil {
		return ""
	}
	var parts []string
	switch {
	case s.Type.Is("array"):
		parts = append(parts, "array of "+schemaType(s.Items))
	case s.Type.Is("object") && s.AdditionalProperties.Schema != nil:
		parts = append(parts, "map of "+schemaType(s.AdditionalProperties.Schema))
	case len(s.AllOf) == 1:
		parts = append(parts, schemaType(s.AllOf[0]))
	case s.Type.IsEmpty():
		parts = append(parts, "any JSON")
	default:
		parts = append(parts, strings.Join(s.Type.Slice(), "|"))
	}
	if s.Format != "" {
		parts = append(parts, "("+s.Format+")")
	}
	if len(s.Enum) > 0 {
		var es []string
		for _, e := range s.Enum {
			es = append(es, fmt.Sprint(e))
		}
		parts = append(parts, "one of "+strings.Join(es, ", "))
	}
	if s.Min != nil {
		parts = append(parts, fmt.Sprintf("≥ %g", *s.Min))
	}
	if s.Max != nil {
		parts = append(parts, fmt.Sprintf("≤ %g", *s.Max))
	}
	if s.Pattern != "" {
		parts = append(parts, "matching "+s.Pattern)
	}
	if s.Default != nil {
		parts = append(parts, fmt.Sprintf("default %v", s.Default))
	}
	if s.Nullable {
		parts = append(parts, "or null")
	}
	return strings.Join(parts, " ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

const docsTemplate = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} API {{.Version}}</title>
<style>
:root { color-scheme: light dark; --fg:#1b1f24; --bg:#fff; --muted:#57606a; --line:#d0d7de; --code:#f6f8fa; --accent:#0969da; }
@media (prefers-color-scheme: dark) { :root { --fg:#e6edf3; --bg:#0d1117; --muted:#8b949e; --line:#30363d; --code:#161b22; --accent:#58a6ff; } }
body { font: 15px/1.5 system-ui, sans-serif; color: var(--fg); background: var(--bg); max-width: 72rem; margin: 0 auto; padding: 1rem; }
a { color: var(--accent); }
code, .path { font-family: ui-monospace, monospace; background: var(--code); padding: 0 .25em; border-radius: 4px; }
h2 { border-bottom: 1px solid var(--line); padding-bottom: .3em; margin-top: 2em; }
section.op { border: 1px solid var(--line); border-radius: 6px; padding: .5rem 1rem; margin: 1rem 0; }
.method { font-weight: 700; font-family: ui-monospace, monospace; display: inline-block; min-width: 4.5em; }
.get { color: #1a7f37; } .post { color: #9a6700; } .patch { color: #8250df; } .delete { color: #cf222e; }
table { border-collapse: collapse; width: 100%; margin: .5rem 0; font-size: 14px; }
th, td { border: 1px solid var(--line); padding: .25rem .5rem; text-align: left; vertical-align: top; }
.muted { color: var(--muted); }
td p { margin: 0; } li { margin: .2em 0; }
</style>
</head>
<body>
<h1>{{.Title}} API <span class="muted">{{.Version}}</span></h1>
<p>The machine-readable contract is <a href="/openapi.yaml">/openapi.yaml</a>.</p>
{{.Intro}}
<nav><ul>{{range .Tags}}<li><a href="#tag-{{.Name}}">{{.Name}}</a><ul>{{range .Ops}}<li><a href="#op-{{.ID}}"><span class="method {{lower .Method}}">{{.Method}}</span> {{.Path}}</a></li>{{end}}</ul></li>{{end}}
<li><a href="#problems">Error types</a></li><li><a href="#schemas">Schemas</a></li></ul></nav>
{{range .Tags}}
<h2 id="tag-{{.Name}}">{{.Name}}</h2>
{{if .Description}}<p>{{.Description}}</p>{{end}}
{{range .Ops}}
<section class="op" id="op-{{.ID}}">
<h3><span class="method {{lower .Method}}">{{.Method}}</span> <span class="path">{{.Path}}</span></h3>
<p>{{.Summary}} <span class="muted">({{.ID}})</span></p>
{{if .Description}}{{md .Description}}{{end}}
{{if .Params}}<table><tr><th>Parameter</th><th>In</th><th>Type</th><th>Description</th></tr>
{{range .Params}}<tr><td><code>{{.Name}}</code>{{if .Required}} <b>required</b>{{end}}</td><td>{{.In}}</td><td>{{.Type}}</td><td>{{md .Description}}</td></tr>{{end}}
</table>{{end}}
{{if .Body}}<p>Request body: {{range .Body}}<code>{{.MediaType}}</code> <a href="#schema-{{.Type}}">{{.Type}}</a>; {{end}}</p>{{end}}
<table><tr><th>Status</th><th>Description</th><th>Body</th></tr>
{{range .Responses}}<tr><td>{{.Status}}</td><td>{{.Description}}</td><td>{{range .Content}}<code>{{.MediaType}}</code> <a href="#schema-{{.Type}}">{{.Type}}</a> {{end}}</td></tr>{{end}}
</table>
</section>
{{end}}{{end}}
<h2 id="problems">Error types</h2>
<p>Errors are <code>application/problem+json</code> (RFC 9457). <code>field</code> names the offending input when known.</p>
<table><tr><th>Status</th><th>type</th><th>title</th></tr>
{{range .Problems}}<tr><td>{{.Status}}</td><td><code>{{.Type}}</code></td><td>{{.Title}}</td></tr>{{end}}
</table>
<h2 id="schemas">Schemas</h2>
{{range .Schemas}}
<section class="op" id="schema-{{.Name}}">
<h3>{{.Name}} <span class="muted">{{.Type}}</span></h3>
{{if .Description}}<p>{{.Description}}</p>{{end}}
{{if .Fields}}<table><tr><th>Field</th><th>Type</th><th>Description</th></tr>
{{range .Fields}}<tr><td><code>{{.Name}}</code>{{if .Required}} <b>required</b>{{end}}</td><td>{{.Type}}</td><td>{{md .Description}}</td></tr>{{end}}
</table>{{end}}
</section>
{{end}}
</body>
</html>
`
