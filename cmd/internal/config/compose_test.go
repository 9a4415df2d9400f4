package config_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/internal/kit/mail"
	"github.com/eisland/isle/internal/kit/objstore"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// There is no Docker engine here, so docker-compose.yml, the Dockerfile
// and the Prometheus and Grafana files they mount are checked as far as a
// parser can: the services a user expects, health checks, scalable
// workers, settings the binaries really read and accept, scrape targets on
// the ports the binaries serve, and dashboards over metrics the code has.

const root = "../../../"

type composeService struct {
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"`
	Hostname    string            `yaml:"hostname"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Ports       []string          `yaml:"ports"`
	Volumes     []string          `yaml:"volumes"`
	Profiles    []string          `yaml:"profiles"`
	Restart     string            `yaml:"restart"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	DependsOn map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
}

// binary is the Isle binary a service runs ("" for other images and
// one-shot shell commands).
func (s composeService) binary() string {
	if s.Build == nil || len(s.Command) == 0 || s.Command[0] == "sh" {
		return ""
	}
	return s.Command[0]
}

// healthPort is the port of the service's wget health check URL.
func (s composeService) healthPort(t *testing.T) string {
	t.Helper()
	require.NotNil(t, s.Healthcheck)
	m := regexp.MustCompile(`^http://127\.0\.0\.1:(\d+)/`).FindStringSubmatch(s.Healthcheck.Test[len(s.Healthcheck.Test)-1])
	require.NotNil(t, m, "health check %v", s.Healthcheck.Test)
	return m[1]
}

type composeFile struct {
	Shared struct {
		Environment map[string]string `yaml:"environment"`
	} `yaml:"x-isle"`
	Services map[string]composeService `yaml:"services"`
}

// readCompose reads docker-compose.yml as docker compose does, with the
// variables .env would give it (composeEnv).
func readCompose(t *testing.T) composeFile {
	t.Helper()
	raw := readComposeRaw(t)
	return parseCompose(t, raw, composeEnv(raw, "test"))
}

func readComposeRaw(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(root + "docker-compose.yml")
	require.NoError(t, err)
	return string(raw)
}

// parseCompose interpolates raw with env and parses it.
func parseCompose(t *testing.T, raw string, env map[string]string) composeFile {
	t.Helper()
	text, err := interpolate(raw, env)
	require.NoError(t, err)
	var doc composeFile
	require.NoError(t, yaml.Unmarshal([]byte(text), &doc))
	return doc
}

// requiredVar matches a variable docker compose refuses to start without:
// ${NAME:?message} or ${NAME?message}.
var requiredVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*):?\?`)

// composeEnv gives each variable the compose file requires a value of its
// own: tag-name, lower case.
func composeEnv(raw, tag string) map[string]string {
	env := map[string]string{}
	for _, m := range requiredVar.FindAllStringSubmatch(raw, -1) {
		env[m[1]] = tag + "-" + strings.ToLower(m[1])
	}
	return env
}

// interpolate resolves docker compose's variables in raw from env: $$ is a
// $; $NAME and ${NAME} are NAME's value or ""; ${NAME:-default} and
// ${NAME-default} fall back on default when NAME is empty (":-") or unset
// ("-"); ${NAME:?message} and ${NAME?message} are an error with message
// when NAME is empty or unset.
func interpolate(raw string, env map[string]string) (string, error) {
	re := regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)`)
	var errs []string
	out := re.ReplaceAllStringFunc(raw, func(m string) string {
		if m == "$$" {
			return "$"
		}
		sub := re.FindStringSubmatch(m)
		name, op, arg := sub[1], sub[2], sub[3]
		if name == "" {
			name = sub[4]
		}
		v, set := env[name]
		switch {
		case op == ":-" && v == "", op == "-" && !set:
			return arg
		case op == ":?" && v == "", op == "?" && !set:
			errs = append(errs, fmt.Sprintf("required variable %s is missing a value: %s", name, arg))
		}
		return v
	})
	if errs != nil {
		return "", errors.New(strings.Join(errs, "; "))
	}
	return out, nil
}

// readBy maps each variable to the binaries that read it.
func readBy() map[string][]string {
	out := map[string][]string{}
	for _, v := range config.Variables() {
		out[v.Name] = v.Binaries
	}
	return out
}

// metricsPort is the port a service serves /metrics on: its operations
// address (the API's serves them there, not on its own address, unless
// API_METRICS_PUBLIC).
func metricsPort(t *testing.T, s composeService) string {
	t.Helper()
	name, def := strings.ToUpper(s.binary())+"_OPS_ADDR", ""
	if s.binary() == "api" {
		def = config.APIOpsAddrDefault
		require.NotContains(t, s.Environment, "API_METRICS_PUBLIC", "the API's metrics are not for its clients")
	}
	addr, ok := s.Environment[name]
	if !ok {
		addr = def
	}
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err, "%s=%q", name, addr)
	require.Contains(t, []string{"", "0.0.0.0"}, host, "%s must listen beyond the container's loopback for Prometheus", name)
	return port
}

func TestComposeFile(t *testing.T) {
	t.Parallel()
	doc := readCompose(t)
	require.Regexp(t, `^mysql:8`, doc.Services["mysql"].Image)
	require.Regexp(t, `^redis:7`, doc.Services["redis"].Image)
	require.Regexp(t, `^rabbitmq:3\.1[2-9]-management$`, doc.Services["rabbitmq"].Image)
	require.Contains(t, doc.Services["mailpit"].Image, "mailpit")
	require.Contains(t, doc.Services["minio"].Image, "minio")
	require.Contains(t, doc.Services["prometheus"].Image, "prometheus")
	require.Contains(t, doc.Services["grafana"].Image, "grafana")
	for name, s := range doc.Services {
		if s.Restart != "no" { // one-shot services exit; the rest are watched
			require.NotNil(t, s.Healthcheck, "%s has a health check", name)
		}
	}
	for _, bin := range []string{"api", "worker", "relay", "reconcile"} {
		s, ok := doc.Services[bin]
		require.True(t, ok, bin)
		require.Equal(t, ".", s.Build, "%s is built from the one Dockerfile", bin)
		require.Equal(t, []string{bin}, s.Command)
		require.Equal(t, "service_completed_successfully", s.DependsOn["migrate"].Condition, "%s waits for migrations", bin)
		require.Equal(t, "service_completed_successfully", s.DependsOn["minio-init"].Condition, "%s waits for the buckets", bin)
		require.Equal(t, "isle:local", s.Image)
		require.Empty(t, s.Profiles, "%s runs without a profile", bin)
		if bin != "api" {
			require.Equal(t, metricsPort(t, s), s.healthPort(t), "%s's health check asks its operations address", bin)
		}
	}
	require.Contains(t, strings.Join(doc.Services["migrate"].Command, " "), "islectl migrate && islectl topology apply")
	// The token key is made at the first start, not written in this file
	// for everyone to read, and the API reads the file it is made in.
	for name, s := range doc.Services {
		require.NotContains(t, s.Environment, "API_JWT_SECRET", name)
		require.NotContains(t, s.Environment, "ISLE_DEV", name)
	}
	keyFile := doc.Services["api"].Environment["API_JWT_SECRET_FILE"]
	require.NotEmpty(t, keyFile)
	require.Contains(t, strings.Join(doc.Services["migrate"].Command, " "), "> "+keyFile)
	require.Contains(t, doc.Services["api"].Volumes, "isle-secrets:"+path.Dir(keyFile)+":ro")
	require.Contains(t, doc.Services["migrate"].Volumes, "isle-secrets:"+path.Dir(keyFile))

	dockerfile, err := os.ReadFile(root + "Dockerfile")
	require.NoError(t, err)
	built := regexp.MustCompile(`\./cmd/(\w+)`).FindAllStringSubmatch(string(dockerfile), -1)
	var bins []string
	for _, m := range built {
		bins = append(bins, m[1])
		_, err := os.Stat(root + "cmd/" + m[1])
		require.NoError(t, err)
	}
	for _, want := range []string{"api", "worker", "relay", "reconcile", "islectl"} {
		require.True(t, slices.Contains(bins, want), "the image holds %s", want)
	}
	require.Contains(t, string(dockerfile), "FROM golang:1.26")
}

// Every variable set for an Isle service is one a binary reads: in the
// block all of them share, read by some binary; added by one service, read
// by that service's binary. And the binary accepts the values.
func TestComposeSettings(t *testing.T) {
	t.Parallel()
	doc := readCompose(t)
	readers := readBy()
	shared := doc.Shared.Environment
	for k := range shared {
		require.NotEmpty(t, readers[k], "x-isle sets %s, which no binary reads", k)
	}
	// The stores open with the keys given (objstore.Open does no I/O).
	for _, k := range []string{"OBJECT_STORE_SOURCE_URL", "OBJECT_REPLICATION_TARGET_URL", "IDENTITY_MATERIAL_STORE_URL"} {
		_, err := objstore.Open(shared[k], objstore.Options{AccessKey: shared["OBJECT_STORE_ACCESS_KEY"], SecretKey: shared["OBJECT_STORE_SECRET_KEY"]})
		require.NoError(t, err, k)
	}
	for _, name := range slices.Sorted(maps.Keys(doc.Services)) {
		s := doc.Services[name]
		if s.Build == nil {
			continue
		}
		for k, v := range s.Environment {
			require.NotEmpty(t, readers[k], "%s sets %s, which no binary reads", name, k)
			if sv, ok := shared[k]; ok && sv == v || s.binary() == "" {
				continue
			}
			require.Contains(t, readers[k], s.binary(), "%s sets %s, which %s does not read", name, k, s.binary())
		}
		if s.binary() == "worker" {
			_, err := mail.Open(s.Environment["EMAIL_MAILER_URL"], mail.Options{})
			require.NoError(t, err, name)
		}
		t.Run(name, func(t *testing.T) { loadService(t, s) })
	}
}

// loadService runs the loader of the service's binary over its environment.
func loadService(t *testing.T, s composeService) {
	t.Helper()

	env := maps.Clone(s.Environment)
	if _, ok := env["API_JWT_SECRET_FILE"]; ok { // made by migrate at the first start
		keyFile := filepath.Join(t.TempDir(), "jwt-secret")
		require.NoError(t, os.WriteFile(keyFile, []byte(strings.Repeat("k", 64)), 0o600))
		env["API_JWT_SECRET_FILE"] = keyFile
	}
	var err error
	switch s.binary() {
	case "api":
		_, err = config.LoadAPI(lookup(env))
	case "worker":
		_, err = config.LoadWorker(lookup(env))
	case "relay":
		_, err = config.LoadRelay(lookup(env))
	case "reconcile":
		_, err = config.LoadReconcile(lookup(env))
	default:
		_, err = config.LoadIslectl(lookup(env))
	}
	require.NoError(t, err)
}

func lookup(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// Workers scale (no host port) and run per kind with -handlers; each
// mails through Mailpit and keeps its objects in MinIO's buckets.
func TestComposeWorkers(t *testing.T) {
	t.Parallel()
	doc := readCompose(t)
	handlers := []string{"all", "dlq"}
	for _, d := range topology.DomainNames() {
		handlers = append(handlers, d, d+"-dlq")
	}
	var kinds int
	for name, s := range doc.Services {
		if s.binary() != "worker" {
			continue
		}
		require.Empty(t, s.Ports, "--scale %s=3 needs a worker without host ports", name)
		require.Regexp(t, `^smtp://mailpit:1025\?(.*&)?tls=none(&|$)`, s.Environment["EMAIL_MAILER_URL"], name)
		require.Equal(t, "service_healthy", doc.Services[name].DependsOn["rabbitmq"].Condition)
		if name == "worker" {
			require.Equal(t, []string{"worker"}, s.Command, "the general worker runs every handler")
			continue
		}
		kinds++
		require.NotEmpty(t, s.Profiles, "%s is a per-kind worker, behind a profile", name)
		require.Len(t, s.Command, 3, name)
		require.Equal(t, "-handlers", s.Command[1], name)
		for _, h := range strings.Split(s.Command[2], ",") {
			require.Contains(t, handlers, h, "%s runs handler %q", name, h)
		}
	}
	require.Positive(t, kinds, "a per-kind worker shows -handlers")

	init := strings.Join(doc.Services["minio-init"].Command, " ")
	minio := doc.Services["minio"].Environment
	for _, k := range []string{"OBJECT_STORE_SOURCE_URL", "OBJECT_REPLICATION_TARGET_URL", "IDENTITY_MATERIAL_STORE_URL"} {
		m := regexp.MustCompile(`^s3://([a-z0-9.-]+)\?endpoint=minio:9000&`).FindStringSubmatch(doc.Shared.Environment[k])
		require.NotNil(t, m, "%s is a bucket of the minio service", k)
		require.Contains(t, init, "isle/"+m[1], "minio-init makes the bucket of %s", k)
	}
	require.Equal(t, minio["MINIO_ROOT_USER"], doc.Shared.Environment["OBJECT_STORE_ACCESS_KEY"])
	require.Equal(t, minio["MINIO_ROOT_PASSWORD"], doc.Shared.Environment["OBJECT_STORE_SECRET_KEY"])
	require.Contains(t, init, minio["MINIO_ROOT_USER"]+" "+minio["MINIO_ROOT_PASSWORD"])
}

// Prometheus scrapes every Isle service, each on the port it serves
// /metrics on, and nothing else.
func TestPrometheusScrapesTheFleet(t *testing.T) {
	t.Parallel()
	doc := readCompose(t)
	require.Contains(t, doc.Services["prometheus"].Volumes, "./deploy/prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro")
	raw, err := os.ReadFile(root + "deploy/prometheus/prometheus.yml")
	require.NoError(t, err)
	var prom struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			MetricsPath   string `yaml:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
			DNSSDConfigs []struct {
				Names []string `yaml:"names"`
				Type  string   `yaml:"type"`
				Port  int      `yaml:"port"`
			} `yaml:"dns_sd_configs"`
		} `yaml:"scrape_configs"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &prom))
	scraped := map[string]string{} // service -> port
	for _, sc := range prom.ScrapeConfigs {
		require.Contains(t, []string{"", "/metrics"}, sc.MetricsPath, sc.JobName)
		for _, st := range sc.StaticConfigs {
			for _, target := range st.Targets {
				host, port, err := net.SplitHostPort(target)
				require.NoError(t, err, target)
				scraped[host] = port
			}
		}
		for _, d := range sc.DNSSDConfigs {
			require.Equal(t, "A", d.Type, "compose's DNS answers A records, one per replica")
			for _, n := range d.Names {
				scraped[n] = strconv.Itoa(d.Port)
			}
		}
	}
	for name, port := range scraped {
		s, ok := doc.Services[name]
		require.True(t, ok, "Prometheus scrapes %s, which is no service", name)
		require.NotEmpty(t, s.binary(), "Prometheus scrapes %s, which is no Isle binary", name)
		require.Equal(t, metricsPort(t, s), port, "Prometheus scrapes %s on its metrics port", name)
	}
	for name, s := range doc.Services {
		if s.binary() != "" {
			require.Contains(t, scraped, name, "Prometheus scrapes %s", name)
		}
	}
}

// The Grafana dashboard parses, queries the provisioned datasource, and
// every PromQL expression names metrics the code registers.
func TestGrafanaDashboard(t *testing.T) {
	t.Parallel()
	doc := readCompose(t)
	g := doc.Services["grafana"]
	require.Contains(t, g.Volumes, "./deploy/grafana/provisioning:/etc/grafana/provisioning:ro")
	require.Contains(t, g.Volumes, "./deploy/grafana/dashboards:/etc/grafana/dashboards:ro")

	raw, err := os.ReadFile(root + "deploy/grafana/provisioning/datasources/prometheus.yml")
	require.NoError(t, err)
	var sources struct {
		Datasources []struct {
			UID  string `yaml:"uid"`
			Type string `yaml:"type"`
			URL  string `yaml:"url"`
		} `yaml:"datasources"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &sources))
	require.Len(t, sources.Datasources, 1)
	ds := sources.Datasources[0]
	require.Equal(t, "prometheus", ds.Type)
	require.Equal(t, "http://prometheus:9090", ds.URL)
	raw, err = os.ReadFile(root + "deploy/grafana/provisioning/dashboards/isle.yml")
	require.NoError(t, err)
	require.Contains(t, string(raw), "path: /etc/grafana/dashboards")

	raw, err = os.ReadFile(root + "deploy/grafana/dashboards/isle.json")
	require.NoError(t, err)
	type source struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			Type       string  `json:"type"`
			Title      string  `json:"title"`
			Datasource *source `json:"datasource"`
			Targets    []struct {
				Datasource *source `json:"datasource"`
				Expr       string  `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	require.NotEmpty(t, dash.UID)

	known := codeMetrics(t)
	used := map[string]bool{}
	name := regexp.MustCompile(`\bisle_[a-z0-9_]+`)
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		require.NotEmpty(t, p.Targets, p.Title)
		require.Equal(t, ds.UID, p.Datasource.UID, p.Title)
		for _, tg := range p.Targets {
			require.Equal(t, ds.UID, tg.Datasource.UID, p.Title)
			names := name.FindAllString(tg.Expr, -1)
			require.NotEmpty(t, names, "%s: %s names no Isle metric", p.Title, tg.Expr)
			for _, n := range names {
				m := seriesOf(n, known)
				require.NotEmpty(t, m, "%s: %s is no metric the code registers", p.Title, n)
				used[m] = true
			}
		}
	}
	for _, want := range []string{
		"isle_http_requests_total", "isle_http_request_duration_seconds", // rate and latency by route
		"isle_messages_total",                // consumer rates and DLQ counts
		"isle_outbox_oldest_pending_seconds", // outbox lag
		"isle_reconcile_runs_total",          // job results
	} {
		require.True(t, used[want], "the dashboard shows %s", want)
	}
}

// seriesOf is the metric a series name belongs to (a histogram's _bucket,
// _sum and _count belong to it), or "" when the code registers none.
func seriesOf(series string, known map[string]bool) string {
	if known[series] {
		return series
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if m, ok := strings.CutSuffix(series, suffix); ok && known[m] {
			return m
		}
	}
	return ""
}

// codeMetrics are the Prometheus metric names the module's Go code
// registers (Name: "isle_..." in collector options).
func codeMetrics(t *testing.T) map[string]bool {
	t.Helper()
	re := regexp.MustCompile(`Name:\s*"(isle_[a-z0-9_]+)"`)
	out := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == ".git" || d.Name() == "deploy" || d.Name() == "e2e"):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go"):
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllSubmatch(src, -1) {
			out[string(m[1])] = true
		}
		return nil
	})
	require.NoError(t, err)
	require.Contains(t, out, "isle_messages_total", "the walk found the messaging metrics")
	return out
}

// Every port the compose file publishes is on the host's loopback: the
// fleet is for this machine, and its pages carry development users and
// Grafana's anonymous viewer.
func TestComposePublishesOnLoopbackOnly(t *testing.T) {
	t.Parallel()
	doc := readCompose(t)
	published := 0
	for _, name := range slices.Sorted(maps.Keys(doc.Services)) {
		for _, p := range doc.Services[name].Ports {
			require.Regexp(t, `^127\.0\.0\.1:\d+:\d+$`, p, "%s publishes %s beyond this machine", name, p)
			published++
		}
	}
	require.Positive(t, published)
}

// secretVar names a setting that holds a password or a key.
var secretVar = regexp.MustCompile(`PASSWORD|SECRET`)

// The administrators' passwords (MySQL's root, MinIO's root, Grafana's
// admin, RabbitMQ's isle-admin) come from .env, which deploy/compose-env
// makes, not from the repository: every password setting is a variable
// docker compose refuses to start without, naming the script; two .env
// files give two sets of passwords wherever they are used; and RabbitMQ's
// definitions make no administrator. The binaries' own RabbitMQ users
// are the exception: least-privileged, made by the definitions with
// their passwords (TestComposeHasOneRabbitMQUserPerBinary).
func TestComposeTakesNoAdminPasswordFromTheRepository(t *testing.T) {
	t.Parallel()
	raw := readComposeRaw(t)
	var literal composeFile
	require.NoError(t, yaml.Unmarshal([]byte(raw), &literal))
	fromEnv := regexp.MustCompile(`\$\{[A-Z_]+:\?[^}]*deploy/compose-env[^}]*\}`)
	check := func(where string, env map[string]string) {
		for k, v := range env {
			if !secretVar.MatchString(k) || strings.HasSuffix(k, "_FILE") || k == "RABBITMQ_PASSWORD" {
				continue
			}
			require.Regexp(t, `^`+fromEnv.String()+`$`, v, "%s: %s", where, k)
		}
	}
	check("x-isle", literal.Shared.Environment)
	for name, s := range literal.Services {
		check(name, s.Environment)
	}
	require.Regexp(t, fromEnv, literal.Shared.Environment["MYSQL_DSN"], "the DSN's password")

	a, b := parseCompose(t, raw, composeEnv(raw, "a")), parseCompose(t, raw, composeEnv(raw, "b"))
	for _, use := range []struct {
		service string
		get     func(composeService) string
	}{
		{"mysql", func(s composeService) string { return s.Environment["MYSQL_ROOT_PASSWORD"] }},
		{"minio", func(s composeService) string { return s.Environment["MINIO_ROOT_PASSWORD"] }},
		{"minio-init", func(s composeService) string { return strings.Join(s.Command, " ") }},
		{"grafana", func(s composeService) string { return s.Environment["GF_SECURITY_ADMIN_PASSWORD"] }},
		{"rabbitmq-admin", func(s composeService) string { return s.Environment["RABBITMQ_ADMIN_PASSWORD"] }},
	} {
		va, vb := use.get(a.Services[use.service]), use.get(b.Services[use.service])
		require.NotEmpty(t, va, use.service)
		require.NotEqual(t, va, vb, "%s's password comes from .env", use.service)
	}
	for _, k := range []string{"MYSQL_DSN", "OBJECT_STORE_SECRET_KEY"} {
		require.NotEqual(t, a.Shared.Environment[k], b.Shared.Environment[k], "%s comes from .env", k)
	}
	mysqlHealth := strings.Join(literal.Services["mysql"].Healthcheck.Test, " ")
	require.Contains(t, mysqlHealth, "$$MYSQL_ROOT_PASSWORD", "the health check reads the container's password")

	_, err := interpolate(raw, nil)
	for name := range composeEnv(raw, "") {
		require.ErrorContains(t, err, "required variable "+name+" is missing a value", "without .env")
	}
	require.ErrorContains(t, err, "deploy/compose-env")

	defs, err := os.ReadFile(root + "deploy/rabbitmq/definitions.json")
	require.NoError(t, err)
	var d struct {
		Users []struct {
			Name string   `json:"name"`
			Tags []string `json:"tags"`
		} `json:"users"`
	}
	require.NoError(t, json.Unmarshal(defs, &d))
	for _, u := range d.Users {
		require.NotContains(t, u.Tags, "administrator", "%s: the administrator's password comes from .env", u.Name)
	}
}

// deploy/compose-env writes every variable the compose file requires, each
// a random key of its own, into a file only its owner reads; a second run
// keeps the values (MySQL keeps its root password in its volume) and adds
// only what is missing.
func TestComposeEnvScript(t *testing.T) {
	t.Parallel()
	want := composeEnv(readComposeRaw(t), "")
	require.NotEmpty(t, want)
	file := filepath.Join(t.TempDir(), ".env")
	run := func() map[string]string {
		t.Helper()
		out, err := exec.Command(root+"deploy/compose-env", file).CombinedOutput()
		require.NoError(t, err, "%s", out)
		raw, err := os.ReadFile(file)
		require.NoError(t, err)
		got := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			k, v, ok := strings.Cut(line, "=")
			require.True(t, ok, line)
			require.NotContains(t, got, k, "%s twice", k)
			got[k] = v
		}
		return got
	}
	first := run()
	require.Equal(t, slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(first)))
	seen := map[string]bool{}
	for k, v := range first {
		require.Regexp(t, `^[0-9a-f]{32}$`, v, k)
		require.False(t, seen[v], "%s repeats a value", k)
		seen[v] = true
	}
	info, err := os.Stat(file)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	require.Equal(t, first, run(), "a second run changes nothing")

	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	dropped, _, _ := strings.Cut(lines[0], "=")
	require.NoError(t, os.WriteFile(file, []byte(strings.Join(lines[1:], "\n")+"\n"), 0o600))
	again := run()
	require.Len(t, again, len(first))
	for k, v := range first {
		if k != dropped {
			require.Equal(t, v, again[k], k)
		}
	}
}

// compose's rabbitmq-admin makes the management UI's administrator from
// .env with deploy/rabbitmq/admin.sh, on the node the rabbitmq service
// runs (its host name fixes the node's name, and the node's data volume
// holds the cookie). On the local RabbitMQ, the script makes an
// administrator with the password given, and a second run sets a new one.
func TestComposeRabbitMQAdmin(t *testing.T) {
	t.Parallel()
	doc := readCompose(t)
	rabbit, admin := doc.Services["rabbitmq"], doc.Services["rabbitmq-admin"]
	require.Equal(t, rabbit.Image, admin.Image, "the CLI of the node's own version")
	require.Equal(t, "no", admin.Restart)
	require.Equal(t, "service_healthy", admin.DependsOn["rabbitmq"].Condition)
	require.Contains(t, admin.Volumes, "./deploy/rabbitmq/admin.sh:/isle/rabbitmq-admin.sh:ro")
	require.Contains(t, admin.Volumes, "rabbitmq-data:/var/lib/rabbitmq:ro")
	require.Contains(t, rabbit.Volumes, "rabbitmq-data:/var/lib/rabbitmq")
	require.Equal(t, "rabbit@"+rabbit.Hostname, admin.Environment["RABBITMQ_NODE"])
	require.Equal(t, []string{"sh", "/isle/rabbitmq-admin.sh"}, admin.Entrypoint)

	if testing.Short() {
		t.Skip("needs RabbitMQ")
	}
	const cookie = "/var/lib/rabbitmq/.erlang.cookie"
	if _, err := exec.LookPath("rabbitmqctl"); err != nil {
		t.Skip("no rabbitmqctl here")
	}
	if _, err := os.ReadFile(cookie); err != nil {
		t.Skipf("the local node's cookie: %v", err)
	}
	user := "isle-admin-test-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	script := func(password string) {
		t.Helper()
		cmd := exec.Command("sh", root+"deploy/rabbitmq/admin.sh")
		cmd.Env = append(os.Environ(), "RABBITMQ_NODE=rabbit@localhost", "RABBITMQ_ADMIN_USER="+user,
			"RABBITMQ_COOKIE_FILE="+cookie, "RABBITMQ_ADMIN_PASSWORD="+password)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	t.Cleanup(func() {
		c := exec.Command("rabbitmqctl", "-q", "-n", "rabbit@localhost", "delete_user", user)
		if out, err := c.CombinedOutput(); err != nil {
			t.Logf("delete %s: %v: %s", user, err, out)
		}
	})
	whoami := func(password string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://127.0.0.1:15672/api/whoami", nil)
		require.NoError(t, err)
		req.SetBasicAuth(user, password)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var me struct {
			Tags any `json:"tags"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&me)
		return resp.StatusCode, fmt.Sprint(me.Tags)
	}
	script("first-password")
	code, tags := whoami("first-password")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, tags, "administrator")
	script("second-password")
	code, _ = whoami("first-password")
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = whoami("second-password")
	require.Equal(t, http.StatusOK, code)
}
