package rest

import (
	"html"
	"html/template"
	"strings"
)

// mdHTML renders the small Markdown subset used in openapi.yaml descriptions:
// blank-line paragraphs, "* " bullet lists (continuation lines indented),
// `code` and **bold**. Everything else is escaped text.
func mdHTML(s string) template.HTML {
	var b strings.Builder
	for _, para := range strings.Split(strings.TrimSpace(s), "\n\n") {
		lines := strings.Split(para, "\n")
		if strings.HasPrefix(lines[0], "* ") {
			b.WriteString("<ul>")
			var item []string
			flush := func() {
				if len(item) > 0 {
					b.WriteString("<li>" + mdInline(strings.Join(item, " ")) + "</li>")
				}
				item = nil
			}
			for _, l := range lines {
				if rest, ok := strings.CutPrefix(l, "* "); ok {
					flush()
					item = append(item, rest)
				} else {
					item = append(item, strings.TrimSpace(l))
				}
			}
			flush()
			b.WriteString("</ul>")
			continue
		}
		b.WriteString("<p>" + mdInline(strings.Join(lines, " ")) + "</p>")
	}
	return template.HTML(b.String()) // every piece went through mdInline's escaping
}

// mdInline escapes s and renders `code` and **bold** spans.
func mdInline(s string) string {
	var b strings.Builder
	for i, part := range strings.Split(s, "`") {
		if i%2 == 1 {
			b.WriteString("<code>" + html.EscapeString(part) + "</code>")
			continue
		}
		for j, bp := range strings.Split(part, "**") {
			if j%2 == 1 {
				b.WriteString("<b>" + html.EscapeString(bp) + "</b>")
			} else {
				b.WriteString(html.EscapeString(bp))
			}
		}
	}
	return b.String()
}
