package validate

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// rabbitmqKeys are the metadata keys of KEDA's rabbitmq scaler.
var rabbitmqKeys = []string{
	"host", "hostFromEnv", "usernameFromEnv", "passwordFromEnv", "protocol", "queueName", "mode", "value",
	"activationValue", "vhostName", "useRegex", "excludeUnacknowledged", "pageSize", "operation", "timeout", "unsafeSsl",
}

// workerQueues returns the queues the Isle worker containers of a pod
// template consume, and whether it has any.
func (c *checker) workerQueues(o Object, t *corev1.PodTemplateSpec) ([]string, bool) {
	var (
		out    []string
		worker bool
	)
	for _, ct := range t.Spec.Containers {
		if !isIsle(ct) || binaryOf(ct) != "worker" {
			continue
		}
		worker = true
		qs, err := c.contract.Consumed(handlersOf(ct))
		if err != nil {
			c.fail(o, "container %s: %v", ct.Name, err)
		}
		out = append(out, qs...)
	}
	return out, worker
}

func (c *checker) scaledObject(o Object, s *ScaledObject) {
	ref := s.Spec.ScaleTargetRef
	if ref == nil || ref.Name == "" {
		c.fail(o, "no scaleTargetRef")
		return
	}
	kind := cmp.Or(ref.Kind, "Deployment")
	target, ok := c.ref(o, kind, ref.Name, false)
	if !ok {
		return
	}
	for _, other := range c.objs {
		if v, ok := other.Value.(*ScaledObject); ok && other.ID() != o.ID() && other.Namespace == o.Namespace &&
			v.Spec.ScaleTargetRef != nil && v.Spec.ScaleTargetRef.Name == ref.Name && cmp.Or(v.Spec.ScaleTargetRef.Kind, "Deployment") == kind {
			c.fail(o, "%s %s is scaled by %s too", kind, ref.Name, other.Name)
		}
	}
	d, ok := target.Value.(*appsv1.Deployment)
	if !ok {
		c.fail(o, "scales a %s; Isle scales Deployments", kind)
		return
	}
	if d.Spec.Replicas != nil {
		c.fail(o, "%s sets replicas, which every kubectl apply would reset under KEDA", target.ID())
	}
	minR, maxR := int32(0), int32(100) // KEDA's defaults
	if s.Spec.MinReplicaCount != nil {
		minR = *s.Spec.MinReplicaCount
	}
	if s.Spec.MaxReplicaCount != nil {
		maxR = *s.Spec.MaxReplicaCount
	}
	if minR < 0 || maxR < 1 || minR > maxR {
		c.fail(o, "replicas %d..%d", minR, maxR)
	}
	consumed, worker := c.workerQueues(target, &d.Spec.Template)
	if len(s.Spec.Triggers) == 0 {
		c.fail(o, "no triggers")
	}
	queues := c.contract.Queues()
	for i, tr := range s.Spec.Triggers {
		if tr.Type != "rabbitmq" {
			c.fail(o, "trigger %d: type %q; Isle's workers scale on their RabbitMQ queues", i, tr.Type)
			continue
		}
		for k := range tr.Metadata {
			if !slices.Contains(rabbitmqKeys, k) {
				c.fail(o, "trigger %d: the rabbitmq scaler has no metadata %q", i, k)
			}
		}
		md := tr.Metadata
		q := md["queueName"]
		switch {
		case !slices.Contains(queues, q):
			c.fail(o, "trigger %d: queue %q is not in the wire contract (doc/contract.md)", i, q)
		case worker && !slices.Contains(consumed, q):
			c.fail(o, "trigger %d: queue %q is not one that %s consumes (-handlers)", i, q, target.ID())
		}
		if !worker {
			c.fail(o, "%s runs no Isle worker", target.ID())
		}
		if md["mode"] != "QueueLength" && md["mode"] != "MessageRate" {
			c.fail(o, "trigger %d: mode %q, want QueueLength or MessageRate", i, md["mode"])
		}
		if v, err := strconv.ParseFloat(md["value"], 64); err != nil || v <= 0 {
			c.fail(o, "trigger %d: value %q, want a positive number", i, md["value"])
		}
		if p := md["protocol"]; p != "" && p != "amqp" && p != "http" && p != "auto" {
			c.fail(o, "trigger %d: protocol %q", i, p)
		}
		if md["host"] != "" {
			c.fail(o, "trigger %d: a host in metadata puts the broker's password in the manifest; use authenticationRef", i)
		}
		if tr.AuthenticationRef == nil && md["hostFromEnv"] == "" {
			c.fail(o, "trigger %d: no authenticationRef: KEDA cannot reach the broker", i)
		} else if tr.AuthenticationRef != nil {
			c.ref(o, cmp.Or(tr.AuthenticationRef.Kind, "TriggerAuthentication"), tr.AuthenticationRef.Name, false)
		}
	}
}

func (c *checker) triggerAuthentication(o Object, t *TriggerAuthentication) {
	if len(t.Spec.SecretTargetRef)+len(t.Spec.Env) == 0 {
		c.fail(o, "no credentials")
	}
	for _, r := range t.Spec.SecretTargetRef {
		if r.Parameter == "" {
			c.fail(o, "secretTargetRef %s/%s: no parameter", r.Name, r.Key)
		}
		c.refKey(o, "Secret", r.Name, r.Key, false)
	}
}

// consumers: every queue of the contract has a worker that consumes it;
// each Deployment of workers scales on its queues (a ScaledObject) and
// may be drained a pod at a time (a PodDisruptionBudget), as the api and
// the relay may.
func (c *checker) consumers() {
	consumed := map[string]bool{}
	for _, w := range c.workloads {
		qs, worker := c.workerQueues(w.owner, w.template)
		for _, q := range qs {
			consumed[q] = true
		}
		if !w.serving {
			continue
		}
		var bin string
		for _, ct := range w.template.Spec.Containers {
			if isIsle(ct) {
				bin = binaryOf(ct)
			}
		}
		if worker && !c.scaled(w.owner) {
			c.fail(w.owner, "no ScaledObject scales this worker")
		}
		if (bin == "api" || bin == "worker" || bin == "relay") && !c.budgeted(w) {
			c.fail(w.owner, "no PodDisruptionBudget selects its pods")
		}
	}
	for _, q := range c.contract.Queues() {
		if !consumed[q] {
			c.errs = append(c.errs, fmt.Errorf("queue %s: no worker consumes it", q))
		}
	}
}

func (c *checker) scaled(d Object) bool {
	for _, o := range c.objs {
		if s, ok := o.Value.(*ScaledObject); ok && o.Namespace == d.Namespace && s.Spec.ScaleTargetRef != nil &&
			s.Spec.ScaleTargetRef.Name == d.Name && cmp.Or(s.Spec.ScaleTargetRef.Kind, "Deployment") == d.Kind {
			return true
		}
	}
	return false
}

func (c *checker) budgeted(w workload) bool {
	for _, o := range c.objs {
		p, ok := o.Value.(*policyv1.PodDisruptionBudget)
		if !ok || o.Namespace != w.owner.Namespace {
			continue
		}
		if sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector); err == nil && !sel.Empty() && sel.Matches(labels.Set(w.template.Labels)) {
			return true
		}
	}
	return false
}
