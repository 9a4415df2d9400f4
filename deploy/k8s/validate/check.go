package validate

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Options tune Check to a build.
type Options struct {
	// External are the objects the build refers to that an operator makes
	// outside it, as Kind/name ("Secret/isle-jwt").
	External []string
}

// workload is a pod template and what owns it.
type workload struct {
	owner    Object
	template *corev1.PodTemplateSpec
	replicas *int32 // nil for Jobs, or a Deployment leaving it to an autoscaler
	serving  bool   // a long-running pod (not a Job)
}

// checker holds one build being checked and the problems found.
type checker struct {
	objs      []Object
	byID      map[string]Object
	contract  Contract
	external  []string
	workloads []workload
	// importers maps a ConfigMap or Secret (Kind/ns/name) that Isle
	// containers take whole (envFrom) to the binaries that take it.
	importers map[string][]string
	errs      []error
}

func (c *checker) fail(o Object, format string, a ...any) {
	c.errs = append(c.errs, fmt.Errorf("%s: %s", o.ID(), fmt.Sprintf(format, a...)))
}

// Check checks a build's objects against each other and the contract,
// and reports every problem at once.
func Check(objs []Object, contract Contract, opts Options) error {
	c := &checker{objs: objs, byID: map[string]Object{}, contract: contract, external: opts.External, importers: map[string][]string{}}
	for _, o := range objs {
		if _, dup := c.byID[o.ID()]; dup {
			c.fail(o, "defined twice")
		}
		c.byID[o.ID()] = o
		switch v := o.Value.(type) {
		case *appsv1.Deployment:
			c.workloads = append(c.workloads, workload{o, &v.Spec.Template, v.Spec.Replicas, true})
		case *appsv1.StatefulSet:
			c.workloads = append(c.workloads, workload{o, &v.Spec.Template, v.Spec.Replicas, true})
		case *batchv1.Job:
			c.workloads = append(c.workloads, workload{o, &v.Spec.Template, nil, false})
		case *batchv1.CronJob:
			c.workloads = append(c.workloads, workload{o, &v.Spec.JobTemplate.Spec.Template, nil, false})
		}
	}
	c.namespaces()
	for _, w := range c.workloads {
		c.workload(w)
	}
	c.imported()
	for _, o := range objs {
		switch v := o.Value.(type) {
		case *corev1.Service:
			c.service(o, v)
		case *policyv1.PodDisruptionBudget:
			c.pdb(o, v)
		case *ScaledObject:
			c.scaledObject(o, v)
		case *TriggerAuthentication:
			c.triggerAuthentication(o, v)
		}
	}
	c.consumers()
	slices.SortFunc(c.errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(slices.CompactFunc(c.errs, func(a, b error) bool { return a.Error() == b.Error() })...)
}

// namespaces: every object lives in a namespace the build declares, when
// it declares any, and in some namespace when it declares none.
func (c *checker) namespaces() {
	var declared []string
	for _, o := range c.objs {
		if o.Kind == "Namespace" {
			declared = append(declared, o.Name)
		}
	}
	for _, o := range c.objs {
		switch {
		case o.Kind == "Namespace":
		case o.Namespace == "":
			c.fail(o, "no namespace")
		case len(declared) > 0 && !slices.Contains(declared, o.Namespace):
			c.fail(o, "namespace %q is not one the build declares (%s)", o.Namespace, strings.Join(declared, ", "))
		}
	}
}

// lookup returns the object kind/ns/name of the build.
func (c *checker) lookup(kind, ns, name string) (Object, bool) {
	o, ok := c.byID[kind+"/"+ns+"/"+name]
	return o, ok
}

// ref checks that from refers to an object that exists: in the build, or
// made outside it (Options.External), or optional.
func (c *checker) ref(from Object, kind, name string, optional bool) (Object, bool) {
	if o, ok := c.lookup(kind, from.Namespace, name); ok {
		return o, true
	}
	if !optional && !slices.Contains(c.external, kind+"/"+name) {
		c.fail(from, "refers to %s %q, which does not exist", kind, name)
	}
	return Object{}, false
}

// keys are the keys of a ConfigMap or Secret.
func keys(o Object) []string {
	var out []string
	switch v := o.Value.(type) {
	case *corev1.ConfigMap:
		for k := range v.Data {
			out = append(out, k)
		}
		for k := range v.BinaryData {
			out = append(out, k)
		}
	case *corev1.Secret:
		for k := range v.Data {
			out = append(out, k)
		}
		for k := range v.StringData {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// refKey checks a reference to one key of a ConfigMap or Secret.
func (c *checker) refKey(from Object, kind, name, key string, optional bool) {
	o, ok := c.ref(from, kind, name, optional)
	if ok && !slices.Contains(keys(o), key) {
		c.fail(from, "refers to key %q of %s %q, which has none", key, kind, name)
	}
}

// selects returns the workloads of ns whose pods sel selects.
func (c *checker) selects(ns string, sel labels.Selector) []workload {
	var out []workload
	for _, w := range c.workloads {
		if w.owner.Namespace == ns && w.serving && sel.Matches(labels.Set(w.template.Labels)) {
			out = append(out, w)
		}
	}
	return out
}

func (c *checker) service(o Object, s *corev1.Service) {
	if len(s.Spec.Selector) == 0 {
		c.fail(o, "no selector")
		return
	}
	targets := c.selects(o.Namespace, labels.SelectorFromSet(s.Spec.Selector))
	if len(targets) == 0 {
		c.fail(o, "selector %v selects no pods of a Deployment or StatefulSet", s.Spec.Selector)
		return
	}
	for _, p := range s.Spec.Ports {
		target := p.TargetPort
		if target.IntVal == 0 && target.StrVal == "" {
			target.IntVal = p.Port
		}
		for _, w := range targets {
			if !declaresPort(w.template.Spec.Containers, target.StrVal, target.IntVal) {
				c.fail(o, "port %q targets %s, which no container of %s declares", p.Name, target.String(), w.owner.ID())
			}
		}
	}
}

func (c *checker) pdb(o Object, p *policyv1.PodDisruptionBudget) {
	if (p.Spec.MinAvailable == nil) == (p.Spec.MaxUnavailable == nil) {
		c.fail(o, "want exactly one of minAvailable and maxUnavailable")
	}
	sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
	switch {
	case err != nil:
		c.fail(o, "selector: %v", err)
	case p.Spec.Selector == nil || sel.Empty():
		c.fail(o, "an empty selector selects every pod of the namespace")
	case len(c.selects(o.Namespace, sel)) == 0:
		c.fail(o, "selector %s selects no pods of a Deployment or StatefulSet", sel)
	}
}

// declaresPort reports whether a container declares the port named name
// or numbered number.
func declaresPort(cs []corev1.Container, name string, number int32) bool {
	for _, ct := range cs {
		for _, p := range ct.Ports {
			if name != "" && p.Name == name || name == "" && p.ContainerPort == number {
				return true
			}
		}
	}
	return false
}
