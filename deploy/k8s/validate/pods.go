package validate

import (
	"net"
	"path"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// binaries are Isle's commands, all in the one image.
var binaries = []string{"api", "worker", "relay", "reconcile", "islectl"}

// isIsle reports whether a container runs the Isle image (its repository's
// last segment is "isle").
func isIsle(ct corev1.Container) bool {
	repo := ct.Image
	if i := strings.IndexByte(repo, '@'); i >= 0 {
		repo = repo[:i]
	}
	if i := strings.LastIndexByte(repo, ':'); i > strings.LastIndexByte(repo, '/') {
		repo = repo[:i]
	}
	return path.Base(repo) == "isle"
}

// binaryOf is the Isle binary a container runs: its command, or the one
// every step of an "sh -c" script runs ("islectl migrate && islectl ...").
func binaryOf(ct corev1.Container) string {
	cmd := append(slices.Clone(ct.Command), ct.Args...)
	if len(cmd) == 0 {
		return "api" // the image's CMD
	}
	if len(cmd) == 3 && cmd[0] == "sh" && cmd[1] == "-c" {
		var bin string
		for _, step := range strings.FieldsFunc(cmd[2], func(r rune) bool { return r == '&' || r == '|' || r == ';' }) {
			f := strings.Fields(step)
			if len(f) == 0 || bin != "" && f[0] != bin {
				return ""
			}
			bin = f[0]
		}
		cmd = []string{bin}
	}
	if slices.Contains(binaries, cmd[0]) {
		return cmd[0]
	}
	return ""
}

// handlersOf is the -handlers value of a worker container ("all" unset),
// read as the flag package reads it: -handlers X, --handlers X, -handlers=X.
func handlersOf(ct corev1.Container) string {
	args := append(slices.Clone(ct.Command), ct.Args...)[1:] // after "worker"
	for i, a := range args {
		name, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		switch {
		case !strings.HasPrefix(a, "-") || name != "handlers":
		case hasValue:
			return value
		case i+1 < len(args):
			return args[i+1]
		}
	}
	return "all"
}

func (c *checker) workload(w workload) {
	o, t := w.owner, w.template
	if sel, ok := selectorOf(o); ok {
		s, err := metav1.LabelSelectorAsSelector(sel)
		switch {
		case sel == nil:
			c.fail(o, "no selector")
		case err != nil:
			c.fail(o, "selector: %v", err)
		case s.Empty():
			c.fail(o, "empty selector")
		case !s.Matches(labels.Set(t.Labels)):
			c.fail(o, "selector %s does not select its own pod labels %v", s, t.Labels)
		}
	}
	volumes := map[string]bool{}
	for _, v := range t.Spec.Volumes {
		volumes[v.Name] = true
		switch {
		case v.ConfigMap != nil:
			c.ref(o, "ConfigMap", v.ConfigMap.Name, optional(v.ConfigMap.Optional))
		case v.Secret != nil:
			c.ref(o, "Secret", v.Secret.SecretName, optional(v.Secret.Optional))
		}
	}
	if p := t.Annotations["prometheus.io/port"]; p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || !declaresPort(t.Spec.Containers, "", int32(n)) {
			c.fail(o, "prometheus.io/port %q is no port a container declares", p)
		}
	}
	for _, ct := range append(slices.Clone(t.Spec.InitContainers), t.Spec.Containers...) {
		for _, m := range ct.VolumeMounts {
			if !volumes[m.Name] {
				c.fail(o, "container %s mounts volume %q, which the pod lacks", ct.Name, m.Name)
			}
		}
		for _, p := range []*corev1.Probe{ct.ReadinessProbe, ct.LivenessProbe, ct.StartupProbe} {
			if port, ok := probePort(p); ok && !declaresPort([]corev1.Container{ct}, port.StrVal, port.IntVal) {
				c.fail(o, "container %s probes port %s, which it does not declare", ct.Name, port.String())
			}
		}
		for _, e := range ct.EnvFrom {
			switch {
			case e.ConfigMapRef != nil:
				c.ref(o, "ConfigMap", e.ConfigMapRef.Name, optional(e.ConfigMapRef.Optional))
			case e.SecretRef != nil:
				c.ref(o, "Secret", e.SecretRef.Name, optional(e.SecretRef.Optional))
			}
		}
		for _, e := range ct.Env {
			switch f := e.ValueFrom; {
			case f == nil:
			case f.ConfigMapKeyRef != nil:
				c.refKey(o, "ConfigMap", f.ConfigMapKeyRef.Name, f.ConfigMapKeyRef.Key, optional(f.ConfigMapKeyRef.Optional))
			case f.SecretKeyRef != nil:
				c.refKey(o, "Secret", f.SecretKeyRef.Name, f.SecretKeyRef.Key, optional(f.SecretKeyRef.Optional))
			}
		}
		if isIsle(ct) {
			c.isleContainer(w, ct)
		}
	}
}

// selectorOf is the pod selector of a Deployment or StatefulSet (a Job
// makes its own).
func selectorOf(o Object) (*metav1.LabelSelector, bool) {
	switch v := o.Value.(type) {
	case *appsv1.Deployment:
		return v.Spec.Selector, true
	case *appsv1.StatefulSet:
		return v.Spec.Selector, true
	}
	return nil, false
}

func optional(b *bool) bool { return b != nil && *b }

// probePort is the port a probe connects to, if it connects to one.
func probePort(p *corev1.Probe) (intstr.IntOrString, bool) {
	switch {
	case p == nil:
	case p.HTTPGet != nil:
		return p.HTTPGet.Port, true
	case p.TCPSocket != nil:
		return p.TCPSocket.Port, true
	case p.GRPC != nil:
		return intstr.FromInt32(p.GRPC.Port), true
	}
	return intstr.IntOrString{}, false
}

// isleContainer checks a container of the Isle image: it runs one binary,
// is locked down and bounded, is probed where it serves, and is given only
// variables its binary reads.
func (c *checker) isleContainer(w workload, ct corev1.Container) {
	o := w.owner
	bin := binaryOf(ct)
	if bin == "" {
		c.fail(o, "container %s runs the Isle image with %q, not one of its binaries", ct.Name, append(ct.Command, ct.Args...))
		return
	}
	sc := ct.SecurityContext
	var nonRoot *bool // the container's setting, else the pod's
	if pod := w.template.Spec.SecurityContext; pod != nil {
		nonRoot = pod.RunAsNonRoot
	}
	if sc != nil && sc.RunAsNonRoot != nil {
		nonRoot = sc.RunAsNonRoot
	}
	switch {
	case nonRoot == nil || !*nonRoot:
		c.fail(o, "container %s: want runAsNonRoot", ct.Name)
	case sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		c.fail(o, "container %s: want readOnlyRootFilesystem", ct.Name)
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		c.fail(o, "container %s: want allowPrivilegeEscalation: false", ct.Name)
	case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL"):
		c.fail(o, "container %s: want capabilities drop ALL", ct.Name)
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := ct.Resources.Requests[r]; !ok {
			c.fail(o, "container %s: no %s request", ct.Name, r)
		}
		if _, ok := ct.Resources.Limits[r]; !ok {
			c.fail(o, "container %s: no %s limit", ct.Name, r)
		}
	}
	for _, e := range ct.Env {
		if !slices.Contains(c.contract.ReadBy[e.Name], bin) {
			c.fail(o, "container %s sets %s, which %s does not read (doc/config.md)", ct.Name, e.Name, bin)
		}
	}
	c.brokerUser(o, ct, bin)
	for _, e := range ct.EnvFrom {
		switch {
		case e.ConfigMapRef != nil:
			id := "ConfigMap/" + o.Namespace + "/" + e.ConfigMapRef.Name
			c.importers[id] = append(c.importers[id], bin)
		case e.SecretRef != nil:
			id := "Secret/" + o.Namespace + "/" + e.SecretRef.Name
			c.importers[id] = append(c.importers[id], bin)
		}
	}
	if !w.serving {
		return
	}
	if ct.ReadinessProbe == nil || ct.LivenessProbe == nil {
		c.fail(o, "container %s: want readiness and liveness probes", ct.Name)
	}
	// The addresses the probes and scrapers reach: the operations address
	// (/metrics, and /healthz of all but the API), which listens on
	// loopback unless set, and the API's own (its probes).
	addrs := [][2]string{{strings.ToUpper(bin) + "_OPS_ADDR", "127.0.0.1"}}
	if bin == "api" {
		addrs = [][2]string{{"API_ADDR", ":8080"}, {"API_OPS_ADDR", "127.0.0.1:9093"}}
	}
	for _, a := range addrs {
		name, addr := a[0], a[1]
		for _, e := range ct.Env {
			if e.Name == name {
				addr = e.Value
			}
		}
		host, port, err := net.SplitHostPort(addr)
		n, _ := strconv.Atoi(port)
		switch {
		case err != nil:
			c.fail(o, "container %s: %s=%q: want host:port reachable from the kubelet (e.g. 0.0.0.0:9090)", ct.Name, name, addr)
		case host != "" && host != "0.0.0.0":
			c.fail(o, "container %s: %s=%q listens where the kubelet's probes cannot reach", ct.Name, name, addr)
		case !declaresPort([]corev1.Container{ct}, "", int32(n)):
			c.fail(o, "container %s: %s=%q is on a port the container does not declare", ct.Name, name, addr)
		}
	}
}

// brokerUser: each binary connects to RabbitMQ as its own user, with the
// least permissions it needs (doc/deploy.md, "RabbitMQ users"): the
// container sets RABBITMQ_USERNAME and RABBITMQ_PASSWORD from the keys
// <binary>-username and <binary>-password of a Secret.
func (c *checker) brokerUser(o Object, ct corev1.Container, bin string) {
	for _, v := range []struct{ name, key string }{{"RABBITMQ_USERNAME", bin + "-username"}, {"RABBITMQ_PASSWORD", bin + "-password"}} {
		i := slices.IndexFunc(ct.Env, func(e corev1.EnvVar) bool { return e.Name == v.name })
		if i < 0 {
			c.fail(o, "container %s: no %s: each binary connects to RabbitMQ as its own user (doc/deploy.md)", ct.Name, v.name)
			continue
		}
		if f := ct.Env[i].ValueFrom; f == nil || f.SecretKeyRef == nil || f.SecretKeyRef.Key != v.key {
			c.fail(o, "container %s: want %s from the key %s of a Secret: %s's own RabbitMQ user (doc/deploy.md)", ct.Name, v.name, v.key, bin)
		}
	}
}

// sharedBrokerUser are the variables no ConfigMap or Secret taken whole
// may hold: a binary's RabbitMQ user is its own.
var sharedBrokerUser = []string{"RABBITMQ_USERNAME", "RABBITMQ_PASSWORD"}

// imported: every key of a ConfigMap or Secret that Isle containers take
// whole is a variable one of those containers' binaries reads, and none
// is a RabbitMQ user, which each binary has of its own.
func (c *checker) imported() {
	for id, bins := range c.importers {
		o, ok := c.byID[id]
		if !ok {
			continue // missing or external: reported by ref
		}
		for _, k := range keys(o) {
			if slices.Contains(sharedBrokerUser, k) {
				c.fail(o, "key %s: each binary connects as its own RabbitMQ user, from a Secret's key (doc/deploy.md)", k)
				continue
			}
			readers := c.contract.ReadBy[k]
			if !slices.ContainsFunc(bins, func(b string) bool { return slices.Contains(readers, b) }) {
				c.fail(o, "key %s is no variable that %s read (doc/config.md)", k, strings.Join(slices.Compact(slices.Sorted(slices.Values(bins))), ", "))
			}
		}
	}
}
