package rest_test

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/runnel/runnel/api"
)

// Walking GET /v1/topics page by page returns every topic once, in order,
// whatever the page size; prefix filters, the Link header leads to the same
// next page, and a forged cursor is a 400 naming the parameter.
func TestTopicListPages(t *testing.T) {
	e := newEnv(t)
	var want []string
	for i := range 23 {
		name := fmt.Sprintf("p%02d", i)
		if i%3 == 0 {
			name = fmt.Sprintf("q%02d", i)
		}
		e.createTopic(name, 1)
		want = append(want, name)
	}
	slices.Sort(want)

	walk := func(t *testing.T, query string) (names []string, pages int) {
		t.Helper()
		path := "/v1/topics?" + query
		for pages = 1; ; pages++ {
			r := e.do("GET", path, "")
			if r.status != 200 {
				t.Fatalf("GET %s: %d %s", path, r.status, r.body)
			}
			var tl api.TopicList
			r.json(t, &tl)
			for _, ts := range tl.Topics {
				names = append(names, ts.Name)
			}
			link := r.header.Get("Link")
			if tl.NextCursor == "" {
				if link != "" {
					t.Fatalf("last page has Link %q", link)
				}
				return names, pages
			}
			if pages > 100 {
				t.Fatalf("more than 100 pages for %d topics", len(want))
			}
			q, _ := url.ParseQuery(query)
			q.Set("cursor", tl.NextCursor)
			path = "/v1/topics?" + q.Encode()
			if !strings.Contains(link, "cursor="+url.QueryEscape(tl.NextCursor)) || !strings.HasSuffix(link, `>; rel="next"`) {
				t.Fatalf("Link %q does not lead to cursor %q", link, tl.NextCursor)
			}
		}
	}
	for _, limit := range []int{1, 2, 5, 7, 22, 23, 24, 1000} {
		got, pages := walk(t, fmt.Sprintf("limit=%d", limit))
		if !slices.Equal(got, want) {
			t.Fatalf("limit %d: %v, want %v", limit, got, want)
		}
		if wantPages := (len(want) + limit - 1) / limit; pages != wantPages && pages != wantPages+1 {
			t.Fatalf("limit %d: %d pages for %d topics", limit, pages, len(want))
		}
	}
	got, _ := walk(t, "prefix=q&limit=3")
	var wantQ []string
	for _, n := range want {
		if strings.HasPrefix(n, "q") {
			wantQ = append(wantQ, n)
		}
	}
	if !slices.Equal(got, wantQ) {
		t.Fatalf("prefix q: %v, want %v", got, wantQ)
	}
	if got, _ := walk(t, "prefix=zz"); len(got) != 0 {
		t.Fatalf("prefix zz: %v", got)
	}
	for _, q := range []string{"cursor=bm90IGEgY3Vyc29y", "cursor=%25%25", "limit=0", "limit=10001", "limit=x"} {
		r := e.do("GET", "/v1/topics?"+q, "")
		field := "query.cursor"
		if strings.HasPrefix(q, "limit") {
			field = "query.limit"
		}
		if p := r.problem(t); r.status != 400 || !strings.HasSuffix(p.Type, ":invalid-request") || p.Field != field {
			t.Fatalf("GET /v1/topics?%s: %d %+v, want 400 invalid-request on %s", q, r.status, p, field)
		}
	}
}

// GET /v1/groups pages as GET /v1/topics does.
func TestGroupListPages(t *testing.T) {
	e, _ := newGroupsEnv(t)
	var want []string
	for i := range 7 {
		name := fmt.Sprintf("g%d", i)
		r := e.do("POST", "/v1/groups/"+name+"/offsets", `{"offsets":[{"topic":"t","partition":0,"offset":1}]}`)
		if r.status != 200 {
			t.Fatalf("commit %s: %d %s", name, r.status, r.body)
		}
		want = append(want, name)
	}
	var got []string
	path := "/v1/groups?limit=3"
	for pages := 1; ; pages++ {
		r := e.do("GET", path, "")
		var gl api.GroupList
		r.json(t, &gl)
		for _, g := range gl.Groups {
			got = append(got, g.Group)
		}
		if gl.NextCursor == "" {
			if pages != 3 {
				t.Fatalf("%d pages of 3 for 7 groups", pages)
			}
			break
		}
		path = "/v1/groups?limit=3&cursor=" + url.QueryEscape(gl.NextCursor)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("walked %v, want %v", got, want)
	}
	if p := e.do("GET", "/v1/groups?cursor=x", "").problem(t); p.Field != "query.cursor" {
		t.Fatalf("bad cursor: %+v", p)
	}
}
