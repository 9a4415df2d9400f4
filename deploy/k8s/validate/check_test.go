package validate_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/eisland/isle/deploy/k8s/validate"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// find returns the object kind/name of objs.
func find(t *testing.T, objs []validate.Object, kind, name string) validate.Object {
	t.Helper()
	for _, o := range objs {
		if o.Kind == kind && o.Name == name {
			return o
		}
	}
	t.Fatalf("no %s %s", kind, name)
	return validate.Object{}
}

func container(t *testing.T, objs []validate.Object, name string) *corev1.Container {
	t.Helper()
	d, ok := deployment(find(t, objs, "Deployment", name))
	require.True(t, ok)
	return &d.Spec.Template.Spec.Containers[0]
}

// Check finds each mistake in an otherwise good build, naming it.
func TestCheckFindsMistakes(t *testing.T) {
	t.Parallel()
	c := contract(t)
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, objs []validate.Object) []validate.Object
		want  string
	}{
		{"a queue outside the contract", func(t *testing.T, objs []validate.Object) []validate.Object {
			so := find(t, objs, "ScaledObject", "isle-worker-email").Value.(*validate.ScaledObject)
			so.Spec.Triggers[0].Metadata["queueName"] = "eisland.email.verify.queue"
			return objs
		}, `queue "eisland.email.verify.queue" is not in the wire contract`},
		{"a queue the target does not consume", func(t *testing.T, objs []validate.Object) []validate.Object {
			so := find(t, objs, "ScaledObject", "isle-worker-email").Value.(*validate.ScaledObject)
			so.Spec.Triggers[0].Metadata["queueName"] = "eisland.agent.billing.deduct.queue"
			return objs
		}, "is not one that Deployment/isle/isle-worker-email consumes"},
		{"an unknown scaler key", func(t *testing.T, objs []validate.Object) []validate.Object {
			so := find(t, objs, "ScaledObject", "isle-worker-game").Value.(*validate.ScaledObject)
			so.Spec.Triggers[0].Metadata["queueLength"] = "5"
			return objs
		}, `no metadata "queueLength"`},
		{"a missing scale target", func(t *testing.T, objs []validate.Object) []validate.Object {
			so := find(t, objs, "ScaledObject", "isle-worker-game").Value.(*validate.ScaledObject)
			so.Spec.ScaleTargetRef.Name = "isle-worker-games"
			return objs
		}, `refers to Deployment "isle-worker-games", which does not exist`},
		{"a selector that misses its pods", func(t *testing.T, objs []validate.Object) []validate.Object {
			d, _ := deployment(find(t, objs, "Deployment", "isle-relay"))
			d.Spec.Template.Labels["app.kubernetes.io/component"] = "relays"
			return objs
		}, "does not select its own pod labels"},
		{"a PDB that selects nothing", func(t *testing.T, objs []validate.Object) []validate.Object {
			p := find(t, objs, "PodDisruptionBudget", "isle-api").Value.(*policyv1.PodDisruptionBudget)
			p.Spec.Selector.MatchLabels["app.kubernetes.io/component"] = "apis"
			return objs
		}, "selects no pods"},
		{"a variable no binary reads", func(t *testing.T, objs []validate.Object) []validate.Object {
			ct := container(t, objs, "isle-worker-billing")
			ct.Env = append(ct.Env, corev1.EnvVar{Name: "WORKER_THREADS", Value: "8"})
			return objs
		}, "sets WORKER_THREADS, which worker does not read"},
		{"a variable of another binary", func(t *testing.T, objs []validate.Object) []validate.Object {
			ct := container(t, objs, "isle-relay")
			ct.Env = append(ct.Env, corev1.EnvVar{Name: "WORKER_PREFETCH", Value: "8"})
			return objs
		}, "sets WORKER_PREFETCH, which relay does not read"},
		{"a ConfigMap key no importer reads", func(t *testing.T, objs []validate.Object) []validate.Object {
			cm := find(t, objs, "ConfigMap", "isle-config").Value.(*corev1.ConfigMap)
			cm.Data["RABBIT_HOST"] = "rabbitmq"
			return objs
		}, "key RABBIT_HOST is no variable"},
		{"a probe on an undeclared port", func(t *testing.T, objs []validate.Object) []validate.Object {
			container(t, objs, "isle-api").ReadinessProbe.HTTPGet.Port = intstr.FromString("ops")
			return objs
		}, `probes port ops, which it does not declare`},
		{"an ops address on loopback", func(t *testing.T, objs []validate.Object) []validate.Object {
			container(t, objs, "isle-worker-dlq").Env = nil
			return objs
		}, `WORKER_OPS_ADDR="127.0.0.1"`},
		{"the API's metrics on loopback", func(t *testing.T, objs []validate.Object) []validate.Object {
			ct := container(t, objs, "isle-api")
			for i, e := range ct.Env {
				if e.Name == "API_OPS_ADDR" {
					ct.Env = append(ct.Env[:i:i], ct.Env[i+1:]...)
				}
			}
			return objs
		}, `API_OPS_ADDR="127.0.0.1:9093" listens where`},
		{"a missing Secret", func(t *testing.T, objs []validate.Object) []validate.Object {
			container(t, objs, "isle-api").Env[0].ValueFrom.SecretKeyRef.Name = "isle-jwt-key"
			return objs
		}, `refers to Secret "isle-jwt-key", which does not exist`},
		{"a writable root file system", func(t *testing.T, objs []validate.Object) []validate.Object {
			f := false
			container(t, objs, "isle-reconcile").SecurityContext.ReadOnlyRootFilesystem = &f
			return objs
		}, "want readOnlyRootFilesystem"},
		{"a queue nobody consumes", func(t *testing.T, objs []validate.Object) []validate.Object {
			container(t, objs, "isle-worker-dlq").Args = []string{"-handlers", "email-dlq"}
			return objs
		}, "queue eisland.mini-game.score.upsert.dlq: no worker consumes it"},
		{"a worker without a ScaledObject", func(t *testing.T, objs []validate.Object) []validate.Object {
			var out []validate.Object
			for _, o := range objs {
				if o.Kind != "ScaledObject" || o.Name != "isle-worker-objects" {
					out = append(out, o)
				}
			}
			return out
		}, "no ScaledObject scales this worker"},
		{"a worker as the api's RabbitMQ user", func(t *testing.T, objs []validate.Object) []validate.Object {
			for _, e := range container(t, objs, "isle-worker-payments").Env {
				if e.Name == "RABBITMQ_USERNAME" {
					e.ValueFrom.SecretKeyRef.Key = "api-username"
				}
			}
			return objs
		}, "RABBITMQ_USERNAME from the key worker-username of a Secret"},
		{"a container without its RabbitMQ user", func(t *testing.T, objs []validate.Object) []validate.Object {
			ct := container(t, objs, "isle-relay")
			ct.Env = slices.DeleteFunc(ct.Env, func(e corev1.EnvVar) bool { return e.Name == "RABBITMQ_PASSWORD" })
			return objs
		}, "container relay: no RABBITMQ_PASSWORD"},
		{"a RabbitMQ user every container shares", func(t *testing.T, objs []validate.Object) []validate.Object {
			cm := find(t, objs, "ConfigMap", "isle-config").Value.(*corev1.ConfigMap)
			cm.Data["RABBITMQ_USERNAME"] = "guest"
			return objs
		}, "key RABBITMQ_USERNAME: each binary connects as its own RabbitMQ user"},
		{"replicas beside KEDA", func(t *testing.T, objs []validate.Object) []validate.Object {
			d, _ := deployment(find(t, objs, "Deployment", "isle-worker-email"))
			n := int32(3)
			d.Spec.Replicas = &n
			return objs
		}, "sets replicas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			objs := tc.spoil(t, build(t, local))
			err := validate.Check(objs, c, options(local))
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

// Decoding is strict: a misspelt, mis-cased or unknown field, and a kind
// without a type, fail the build.
func TestBuildIsStrict(t *testing.T) {
	t.Parallel()
	deploymentYAML := `apiVersion: apps/v1
kind: Deployment
metadata: {name: d}
spec:
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec:
      containers: [{name: c, image: isle, %s}]
`
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"unknown field", strings.Replace(deploymentYAML, "%s", "imagePullPolice: Always", 1), `unknown field "spec.template.spec.containers[0].imagePullPolice"`},
		{"field in another case", strings.Replace(deploymentYAML, "%s", "ImagePullPolicy: Always", 1), `unknown field "spec.template.spec.containers[0].ImagePullPolicy"`},
		{"KEDA field", "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: s}\nspec: {scaleTargetRef: {name: d}, minReplicas: 1, triggers: []}\n", `unknown field "spec.minReplicas"`},
		{"unknown kind", "apiVersion: keda.sh/v1alpha1\nkind: ScaledJob\nmetadata: {name: s}\n", `no type for apiVersion "keda.sh/v1alpha1" kind "ScaledJob"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fsys := filesys.MakeFsInMemory()
			require.NoError(t, fsys.WriteFile("/k/kustomization.yaml", []byte("resources: [objects.yaml]\n")))
			require.NoError(t, fsys.WriteFile("/k/objects.yaml", []byte(tc.doc)))
			_, err := validate.Build(fsys, "/k")
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}
