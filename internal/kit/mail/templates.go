package mail

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	htemplate "html/template"
	"maps"
	"slices"
	"strings"
	"sync"
	ttemplate "text/template"
)

// templateFS holds the layouts (templates/{code,receipt}.{txt,html}.tmpl)
// and, per language, the words: common.tmpl, one file per scene and
// receipt.tmpl, each defining the blocks its layout calls.
//
//go:embed templates
var templateFS embed.FS

// Languages of the templates. RenderCode and RenderReceipt take "" or any
// other tag as LangDefault: Isle's users are in China (UTC+8, CNY).
const (
	LangZH      = "zh-CN"
	LangEN      = "en"
	LangDefault = LangZH
)

// sceneFiles maps each verification scene of the contract (doc/mail.md,
// EmailCodeDispatchMessage.scene) to its template file.
var sceneFiles = map[string]string{
	"REGISTER":       "register",
	"LOGIN":          "login",
	"RESET_PASSWORD": "reset-password",
	"CHANGE_EMAIL":   "change-email",
	"UNREGISTER":     "unregister",
}

// Scenes lists the verification scenes that have templates, sorted.
func Scenes() []string { return slices.Sorted(maps.Keys(sceneFiles)) }

// Content is a rendered mail; Message turns it into one to send.
type Content struct {
	Subject string
	Text    string
	HTML    string
}

// Message is the mail of c to the address to, for the dispatch key.
func (c Content) Message(to, idempotencyKey string) Message {
	return Message{To: to, Subject: c.Subject, Text: c.Text, HTML: c.HTML, IdempotencyKey: idempotencyKey}
}

// templatePair is one mail's text and HTML templates, each holding the
// layout and the blocks of one language and scene (or receipt).
type templatePair struct {
	text *ttemplate.Template
	html *htemplate.Template
}

// templateKey names a templatePair: a language and a scene or "receipt".
type templateKey struct{ lang, name string }

// parsedTemplates parses every template once, on first use. The templates
// are embedded, so an error is a bug that TestTemplates shows.
var parsedTemplates = sync.OnceValues(func() (map[templateKey]templatePair, error) {
	all := map[templateKey]templatePair{}
	var errs []error
	for _, lang := range []string{LangZH, LangEN} {
		names := slices.Collect(maps.Values(sceneFiles))
		for _, name := range append(names, "receipt") {
			layout := "code"
			if name == "receipt" {
				layout = "receipt"
			}
			files := []string{
				"templates/" + layout + ".txt.tmpl",
				"templates/" + lang + "/common.tmpl",
				"templates/" + lang + "/" + name + ".tmpl",
			}
			text, err := ttemplate.New(layout).ParseFS(templateFS, files...)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			files[0] = "templates/" + layout + ".html.tmpl"
			html, err := htemplate.New(layout).ParseFS(templateFS, files...)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			all[templateKey{lang, name}] = templatePair{text: text, html: html}
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("mail: templates: %w", errors.Join(errs...))
	}
	return all, nil
})

// normLang maps a language tag to one the templates have.
func normLang(lang string) string {
	l := strings.ToLower(lang)
	if l == "en" || strings.HasPrefix(l, "en-") {
		return LangEN
	}
	return LangDefault
}

// render executes the subject block and both layouts of key with data.
func render(key templateKey, layout string, data any) (Content, error) {
	all, err := parsedTemplates()
	if err != nil {
		return Content{}, err
	}
	t, ok := all[key]
	if !ok {
		return Content{}, fmt.Errorf("mail: no template %s/%s", key.lang, key.name)
	}
	var subject, text, html bytes.Buffer
	if err := t.text.ExecuteTemplate(&subject, "subject", data); err != nil {
		return Content{}, fmt.Errorf("mail: render %s/%s subject: %w", key.lang, key.name, err)
	}
	if err := t.text.ExecuteTemplate(&text, layout+".txt.tmpl", data); err != nil {
		return Content{}, fmt.Errorf("mail: render %s/%s text: %w", key.lang, key.name, err)
	}
	if err := t.html.ExecuteTemplate(&html, layout+".html.tmpl", data); err != nil {
		return Content{}, fmt.Errorf("mail: render %s/%s HTML: %w", key.lang, key.name, err)
	}
	c := Content{Subject: strings.TrimSpace(subject.String()), Text: text.String(), HTML: html.String()}
	if hasControl(c.Subject) {
		return Content{}, fmt.Errorf("mail: render %s/%s: subject %q has control characters", key.lang, key.name, c.Subject)
	}
	return c, nil
}
