package config_test

import (
	"encoding/json"
	"io/fs"
	"maps"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/internal/mail"
	"github.com/eisland/isle/internal/objstore"
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

func readCompose(t *testing.T) composeFile {
	t.Helper()
	raw, err := os.ReadFile(root + "docker-compose.yml")
	require.NoError(t, err)
	var doc composeFile
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	return doc
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
