package validate_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/eisland/isle/deploy/k8s/validate"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

const (
	k8sDir  = ".."        // deploy/k8s
	repoDir = "../../../" // the Isle module
	local   = "overlays/local"
)

// operatorSecrets are made by hand, never kept in git (doc/deploy.md).
var operatorSecrets = []string{"Secret/isle-jwt"}

// overlaySecrets are what every overlay adds to the base.
var overlaySecrets = []string{"Secret/isle-secrets", "Secret/isle-rabbitmq", "Secret/isle-rabbitmq-keda"}

func contract(t *testing.T) validate.Contract {
	t.Helper()
	contractMD, err := os.ReadFile(repoDir + "doc/contract.md")
	require.NoError(t, err)
	configMD, err := os.ReadFile(repoDir + "doc/config.md")
	require.NoError(t, err)
	c, err := validate.ParseContract(contractMD, configMD)
	require.NoError(t, err)
	return c
}

// kustomizations lists the directories of deploy/k8s that hold a
// kustomization, relative to it.
func kustomizations(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(k8sDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "kustomization.yaml" {
			rel, err := filepath.Rel(k8sDir, filepath.Dir(p))
			dirs = append(dirs, filepath.ToSlash(rel))
			return err
		}
		return err
	})
	require.NoError(t, err)
	return dirs
}

func options(dir string) validate.Options {
	if dir == "base" {
		return validate.Options{External: slices.Concat(operatorSecrets, overlaySecrets)}
	}
	return validate.Options{External: operatorSecrets}
}

func build(t *testing.T, dir string) []validate.Object {
	t.Helper()
	objs, err := validate.Build(filesys.MakeFsOnDisk(), filepath.Join(k8sDir, dir))
	require.NoError(t, err)
	return objs
}

// Every kustomization builds, decodes strictly and passes Check.
func TestManifests(t *testing.T) {
	t.Parallel()
	c := contract(t)
	dirs := kustomizations(t)
	require.Contains(t, dirs, "base")
	require.Contains(t, dirs, local)
	for _, dir := range dirs {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			objs := build(t, dir)
			require.NoError(t, validate.Check(objs, c, options(dir)))
		})
	}
}

// The local overlay's fleet: a migration Job, the api behind a
// Service, two relays, two reconcilers, a Deployment per worker kind.
func TestLocalOverlayShape(t *testing.T) {
	t.Parallel()
	kinds := map[string]int{}
	workers := map[string]string{}
	for _, o := range build(t, local) {
		kinds[o.Kind]++
		if d, ok := deployment(o); ok && strings.HasPrefix(o.Name, "isle-worker-") {
			workers[o.Name] = strings.Join(d.Spec.Template.Spec.Containers[0].Args, " ")
		}
	}
	// Which consumers each kind runs is the registry's (handlers.WorkerKinds,
	// whose generator's test holds the manifests to it) and doc/deploy.md's
	// (TestDeployDocTable): here, that the overlay has the kinds.
	require.Contains(t, workers, "isle-worker-dlq")
	require.GreaterOrEqual(t, len(workers), 2)
	for name, args := range workers {
		require.Regexp(t, `^-handlers [a-z-]+(,[a-z-]+)*$`, args, name)
	}
	require.Equal(t, 7, kinds["ScaledObject"])
	require.Equal(t, 1, kinds["TriggerAuthentication"])
	require.Equal(t, 9, kinds["PodDisruptionBudget"]) // api, relay, 7 worker kinds
	replicas := map[string]int32{}
	for _, o := range build(t, local) {
		if d, ok := deployment(o); ok && d.Spec.Replicas != nil {
			replicas[o.Name] = *d.Spec.Replicas
		}
	}
	require.EqualValues(t, 2, replicas["isle-relay"])
	require.EqualValues(t, 2, replicas["isle-reconcile"], "the leader lease runs each job once")
	var migrate []string
	for _, o := range build(t, local) {
		if j, ok := o.Value.(*batchv1.Job); ok && o.Name == "isle-migrate" {
			migrate = j.Spec.Template.Spec.Containers[0].Command
		}
	}
	require.Equal(t, []string{"sh", "-c", "islectl migrate && islectl topology apply"}, migrate)
}

// Source files have no duplicate keys, which a build would hide (the
// last one wins).
func TestNoDuplicateKeys(t *testing.T) {
	t.Parallel()
	sep := regexp.MustCompile(`(?m)^---\s*$`)
	err := filepath.WalkDir(k8sDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, doc := range sep.Split(string(raw), -1) {
			_, err := yaml.YAMLToJSONStrict([]byte(doc))
			require.NoError(t, err, "%s, document %d", p, i+1)
		}
		return nil
	})
	require.NoError(t, err)
}

func deployment(o validate.Object) (*appsv1.Deployment, bool) {
	d, ok := o.Value.(*appsv1.Deployment)
	return d, ok
}

// doc/deploy.md's table of worker kinds says what the base runs.
func TestDeployDocTable(t *testing.T) {
	t.Parallel()
	md, err := os.ReadFile(repoDir + "doc/deploy.md")
	require.NoError(t, err)
	code := regexp.MustCompile("`([^`]+)`")
	type kind struct {
		Handlers, Queues string
		Value, Max       string
	}
	documented := map[string]kind{}
	for _, line := range strings.Split(string(md), "\n") {
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if !strings.HasPrefix(line, "| `isle-worker-") || len(cells) != 5 {
			continue
		}
		var queues []string
		for _, m := range code.FindAllStringSubmatch(cells[2], -1) {
			queues = append(queues, "eisland."+m[1])
		}
		if cells[2] == "every DLQ" {
			queues = []string{"dlq"}
		}
		documented[strings.Trim(cells[0], "`")] = kind{strings.Trim(cells[1], "`"), strings.Join(queues, ","), cells[3], cells[4]}
	}
	built := map[string]kind{}
	for _, o := range build(t, "base") {
		so, ok := o.Value.(*validate.ScaledObject)
		if !ok {
			continue
		}
		var queues []string
		for _, tr := range so.Spec.Triggers {
			queues = append(queues, tr.Metadata["queueName"])
		}
		if strings.HasSuffix(o.Name, "-dlq") {
			for _, q := range queues {
				require.True(t, strings.HasSuffix(q, ".dlq"), "the DLQ worker scales on %s", q)
			}
			queues = []string{"dlq"}
		}
		built[o.Name] = kind{Queues: strings.Join(queues, ","), Value: so.Spec.Triggers[0].Metadata["value"], Max: strconv.Itoa(int(*so.Spec.MaxReplicaCount))}
	}
	for _, o := range build(t, "base") {
		if d, ok := deployment(o); ok && built[o.Name].Queues != "" {
			k := built[o.Name]
			k.Handlers = d.Spec.Template.Spec.Containers[0].Args[1]
			built[o.Name] = k
		}
	}
	require.Equal(t, built, documented)
}
