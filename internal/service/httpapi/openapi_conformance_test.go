package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/stretchr/testify/require"
)

// The media types the document names that kin-openapi has no body decoder
// for: pages and the stylesheet are text, objects are bytes.
func init() {
	for _, t := range []string{"text/html", "text/css"} {
		openapi3filter.RegisterBodyDecoder(t, openapi3filter.PlainBodyDecoder)
	}
	for _, t := range []string{"image/png", "image/jpeg", "image/webp", "image/gif"} {
		openapi3filter.RegisterBodyDecoder(t, openapi3filter.FileBodyDecoder)
	}
}

// conformance checks every answer a server gives against the OpenAPI
// document the API serves: the request must name an operation of the
// document (else the answer is the router's 404 or 405, in the error
// model), the status must be one the operation lists, the Content-Type one
// it lists for that status, and the body must match its schema; a status
// documented without content must come without a body. A request the API
// accepted (below 400) must be one the document admits: its parameters,
// body and credentials. It records which status and media type each
// operation answered, for the coverage checks.
type conformance struct {
	doc   *openapi3.T
	paths []string // the document's paths, in the order they are matched

	mu     sync.Mutex
	seen   map[string]map[string]int // "GET /v1/me" -> "401 application/json" -> times
	faults []string
}

// newConformance loads the document the handler serves at /openapi.json.
func newConformance(t *testing.T, h http.Handler) *conformance {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi.json", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	doc, err := openapi3.NewLoader().LoadFromData(rec.Body.Bytes())
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()))
	paths := doc.Paths.InMatchingOrder()
	// Paths without templated segments match first.
	slices.SortStableFunc(paths, func(a, b string) int { return strings.Count(a, "{") - strings.Count(b, "{") })
	return &conformance{doc: doc, paths: paths, seen: map[string]map[string]int{}}
}

// wrap serves h, checking each answer as it goes out.
func (c *conformance) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqBody, err := io.ReadAll(r.Body)
		if err != nil {
			c.fault("%s %s: the request body could not be read: %v", r.Method, r.URL.Path, err)
		}
		sent := r.Clone(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(reqBody))
		rec := &recording{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		c.check(sent, reqBody, rec.status(), w.Header(), rec.body.Bytes())
	})
}

// recording passes an answer on and keeps a copy of it.
type recording struct {
	http.ResponseWriter
	code int
	body bytes.Buffer
}

func (r *recording) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recording) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

func (r *recording) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recording) status() int { return max(r.code, http.StatusOK) }

func (c *conformance) fault(format string, a ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults = append(c.faults, fmt.Sprintf(format, a...))
}

func (c *conformance) note(op string, status int, mediaType string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen[op] == nil {
		c.seen[op] = map[string]int{}
	}
	c.seen[op][answerKey(status, mediaType)]++
}

func answerKey(status int, mediaType string) string {
	if mediaType == "" {
		return fmt.Sprint(status)
	}
	return fmt.Sprintf("%d %s", status, mediaType)
}

func (c *conformance) check(req *http.Request, reqBody []byte, status int, header http.Header, body []byte) {
	label := fmt.Sprintf("%s %s → %d", req.Method, req.URL.RequestURI(), status)
	mediaType := ""
	if ct := header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil {
			c.fault("%s: Content-Type %q: %v", label, ct, err)
		}
		mediaType = mt
	}
	route, params, unlisted := c.findRoute(req)
	if route == nil {
		c.checkUnlisted(label, unlisted, status, mediaType, body)
		return
	}
	op := route.Method + " " + route.Path
	c.note(op, status, mediaType)
	documented := route.Operation.Responses.Status(status)
	if documented == nil {
		c.fault("%s: %s does not document %d: %.200s", label, op, status, body)
		return
	}
	if len(documented.Value.Content) == 0 {
		if len(body) > 0 {
			c.fault("%s: %s documents %d without content, but it came with %q: %.200s", label, op, status, mediaType, body)
		}
	} else {
		in := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
			Status:                 status,
			Header:                 header,
			Body:                   io.NopCloser(bytes.NewReader(body)),
			Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
		}
		if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
			c.fault("%s: %v", label, err)
		}
	}
	if status < 400 {
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: &openapi3filter.Options{
			MultiError: true, AuthenticationFunc: presented,
		}}
		in.Request.Body = io.NopCloser(bytes.NewReader(reqBody))
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			c.fault("%s: the API accepted a request the document does not admit: %v", label, err)
		}
	}
}

// presented checks that a request accepted carries the credentials one of
// its operation's security requirements names.
func presented(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	r := in.RequestValidationInput.Request
	switch s := in.SecurityScheme; {
	case s.Type == "http" && s.Scheme == "bearer":
		if strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
			return nil
		}
	case s.Type == "apiKey" && s.In == "cookie":
		if _, err := r.Cookie(s.Name); err == nil {
			return nil
		}
	}
	return fmt.Errorf("no %s credentials", in.SecuritySchemeName)
}

// findRoute finds the operation of req: the path of the document whose
// template matches req's path segment for segment (a path without
// templated segments first), and the values of its templated segments.
// Without one, it returns the status the router answers: 405 when the path
// is the document's but the method is not, else 404.
func (c *conformance) findRoute(req *http.Request) (*routers.Route, map[string]string, int) {
	unlisted := http.StatusNotFound
	for _, path := range c.paths {
		params, ok := matchPath(path, req.URL.Path)
		if !ok {
			continue
		}
		item := c.doc.Paths.Value(path)
		op := item.GetOperation(req.Method)
		if op == nil {
			unlisted = http.StatusMethodNotAllowed
			continue
		}
		return &routers.Route{Spec: c.doc, Path: path, PathItem: item, Method: req.Method, Operation: op}, params, 0
	}
	return nil, nil, unlisted
}

// matchPath matches a path against a template of the document, each
// {name} one whole, non-empty segment.
func matchPath(template, path string) (map[string]string, bool) {
	want, got := strings.Split(template, "/"), strings.Split(path, "/")
	if len(want) != len(got) {
		return nil, false
	}
	params := map[string]string{}
	for i, w := range want {
		if name, ok := strings.CutPrefix(w, "{"); ok && strings.HasSuffix(name, "}") {
			if got[i] == "" {
				return nil, false
			}
			params[strings.TrimSuffix(name, "}")] = got[i]
		} else if w != got[i] {
			return nil, false
		}
	}
	return params, true
}

// checkUnlisted checks the answer to a path or method the document does
// not list: the router's 404 or 405 in the error model.
func (c *conformance) checkUnlisted(label string, want, status int, mediaType string, body []byte) {
	c.note(fmt.Sprintf("unlisted %d", want), status, mediaType)
	if status != want || mediaType != "application/json" {
		c.fault("%s: not in the document, so it must be the router's %d in the error model, not %d %s: %.200s", label, want, status, mediaType, body)
		return
	}
	schema := c.doc.Components.Schemas["Error"].Value
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		c.fault("%s: %v", label, err)
		return
	}
	if err := schema.VisitJSON(v); err != nil {
		c.fault("%s: not the error model: %v", label, err)
	}
}

// requireClean fails the test with every answer that broke the document.
func (c *conformance) requireClean(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Empty(t, c.faults, "answers the document does not describe:\n%s", strings.Join(c.faults, "\n"))
}

// requireEveryOperation fails unless every operation of the document was
// answered at least once.
func (c *conformance) requireEveryOperation(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var missed []string
	for _, op := range c.operations() {
		if len(c.seen[op]) == 0 {
			missed = append(missed, op)
		}
	}
	require.Empty(t, missed, "operations of the document no request reached")
}

// requireEveryAnswer fails unless each operation whose path starts with
// prefix was seen answering every status, with every media type, that the
// document lists for it.
func (c *conformance) requireEveryAnswer(t *testing.T, prefix string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var missed []string
	for _, op := range c.operations() {
		if _, path, _ := strings.Cut(op, " "); !strings.HasPrefix(path, prefix) {
			continue
		}
		for _, want := range c.documented(op) {
			if c.seen[op][want] == 0 {
				missed = append(missed, op+": "+want)
			}
		}
	}
	require.Empty(t, missed, "answers the document lists that no request drew")
}

// unseen lists the documented answers no request drew, for the log.
func (c *conformance) unseen() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, op := range c.operations() {
		for _, want := range c.documented(op) {
			if c.seen[op][want] == 0 {
				out = append(out, op+": "+want)
			}
		}
	}
	return out
}

// operations are "METHOD /path" of every operation, sorted.
func (c *conformance) operations() []string {
	var out []string
	for path, item := range c.doc.Paths.Map() {
		for method := range item.Operations() {
			out = append(out, method+" "+path)
		}
	}
	slices.Sort(out)
	return out
}

// documented are the answers the document lists for op: "status media".
func (c *conformance) documented(op string) []string {
	method, path, _ := strings.Cut(op, " ")
	var out []string
	for code, resp := range c.doc.Paths.Value(path).GetOperation(method).Responses.Map() {
		var status int
		if _, err := fmt.Sscan(code, &status); err != nil {
			continue // default or a range
		}
		if len(resp.Value.Content) == 0 {
			out = append(out, answerKey(status, ""))
		}
		for mt := range resp.Value.Content {
			out = append(out, answerKey(status, mt))
		}
	}
	slices.Sort(out)
	return out
}
