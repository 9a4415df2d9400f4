package config_test

import (
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/eisland/isle/cmd/internal/config"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// There is no Docker engine here, so docker-compose.yml and the Dockerfile
// are checked as far as a parser can: the services a user expects, health
// checks, a scalable worker, and only variables the binaries really read.
func TestComposeFile(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../../docker-compose.yml")
	require.NoError(t, err)
	var doc struct {
		Services map[string]struct {
			Image       string            `yaml:"image"`
			Build       any               `yaml:"build"`
			Command     []string          `yaml:"command"`
			Environment map[string]string `yaml:"environment"`
			Ports       []string          `yaml:"ports"`
			Volumes     []string          `yaml:"volumes"`
			Healthcheck *struct {
				Test []string `yaml:"test"`
			} `yaml:"healthcheck"`
			DependsOn map[string]struct {
				Condition string `yaml:"condition"`
			} `yaml:"depends_on"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &doc))

	known := map[string]bool{}
	for _, v := range config.Variables() {
		known[v.Name] = true
	}
	require.Regexp(t, `^mysql:8`, doc.Services["mysql"].Image)
	require.Regexp(t, `^redis:7`, doc.Services["redis"].Image)
	require.Regexp(t, `^rabbitmq:3\.1[2-9]-management$`, doc.Services["rabbitmq"].Image)
	require.Contains(t, doc.Services["mailpit"].Image, "mailpit")
	for name, s := range doc.Services {
		if name != "migrate" {
			require.NotNil(t, s.Healthcheck, "%s has a health check", name)
		}
		for k := range s.Environment {
			if s.Build != nil {
				require.True(t, known[k], "%s sets %s, which no binary reads", name, k)
			}
		}
	}
	for _, bin := range []string{"api", "worker", "relay", "reconcile"} {
		s, ok := doc.Services[bin]
		require.True(t, ok, bin)
		require.Equal(t, ".", s.Build, "%s is built from the one Dockerfile", bin)
		require.Equal(t, []string{bin}, s.Command)
		require.Equal(t, "service_completed_successfully", s.DependsOn["migrate"].Condition, "%s waits for migrations", bin)
		require.Equal(t, "isle:local", s.Image)
	}
	require.Empty(t, doc.Services["worker"].Ports, "--scale worker=3 needs a worker without host ports")
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

	dockerfile, err := os.ReadFile("../../../Dockerfile")
	require.NoError(t, err)
	built := regexp.MustCompile(`\./cmd/(\w+)`).FindAllStringSubmatch(string(dockerfile), -1)
	var bins []string
	for _, m := range built {
		bins = append(bins, m[1])
		_, err := os.Stat("../../../cmd/" + m[1])
		require.NoError(t, err)
	}
	for _, want := range []string{"api", "worker", "relay", "reconcile", "islectl"} {
		require.True(t, slices.Contains(bins, want), "the image holds %s", want)
	}
	require.Contains(t, string(dockerfile), "FROM golang:1.26")
}
