package validate

import (
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Object is one object of a build, decoded into its type (Value is a
// pointer: *appsv1.Deployment, *ScaledObject, ...).
type Object struct {
	APIVersion, Kind, Namespace, Name string
	Value                             any
}

// ID names the object in messages: Kind/namespace/name.
func (o Object) ID() string { return o.Kind + "/" + o.Namespace + "/" + o.Name }

// types are the kinds the validator knows, by apiVersion and kind. A kind
// missing here is an error: add its type rather than let it pass unread.
var types = map[string]func() any{
	"v1/Namespace":                             func() any { return new(corev1.Namespace) },
	"v1/ConfigMap":                             func() any { return new(corev1.ConfigMap) },
	"v1/Secret":                                func() any { return new(corev1.Secret) },
	"v1/Service":                               func() any { return new(corev1.Service) },
	"v1/ServiceAccount":                        func() any { return new(corev1.ServiceAccount) },
	"v1/PersistentVolumeClaim":                 func() any { return new(corev1.PersistentVolumeClaim) },
	"apps/v1/Deployment":                       func() any { return new(appsv1.Deployment) },
	"apps/v1/StatefulSet":                      func() any { return new(appsv1.StatefulSet) },
	"batch/v1/Job":                             func() any { return new(batchv1.Job) },
	"batch/v1/CronJob":                         func() any { return new(batchv1.CronJob) },
	"policy/v1/PodDisruptionBudget":            func() any { return new(policyv1.PodDisruptionBudget) },
	"networking.k8s.io/v1/NetworkPolicy":       func() any { return new(networkingv1.NetworkPolicy) },
	"rbac.authorization.k8s.io/v1/Role":        func() any { return new(rbacv1.Role) },
	"rbac.authorization.k8s.io/v1/RoleBinding": func() any { return new(rbacv1.RoleBinding) },
	"keda.sh/v1alpha1/ScaledObject":            func() any { return new(ScaledObject) },
	"keda.sh/v1alpha1/TriggerAuthentication":   func() any { return new(TriggerAuthentication) },
}

// Build runs the kustomization in dir of fsys, as `kubectl kustomize dir`
// does, and decodes every object it makes with Decode.
func Build(fsys filesys.FileSystem, dir string) ([]Object, error) {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	var (
		out  []Object
		errs []error
	)
	for _, r := range m.Resources() {
		raw, err := r.MarshalJSON()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", r.GetKind(), r.GetName(), err))
			continue
		}
		o, err := Decode(raw)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, o)
	}
	return out, errors.Join(errs...)
}

// Decode reads one object's JSON into its type, strictly: an unknown or
// duplicate field, or one spelled in another case, is an error, as is a
// kind the validator has no type for.
func Decode(raw []byte) (Object, error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := json.UnmarshalCaseSensitivePreserveInts(raw, &head); err != nil {
		return Object{}, fmt.Errorf("decode: %w", err)
	}
	o := Object{APIVersion: head.APIVersion, Kind: head.Kind, Namespace: head.Metadata.Namespace, Name: head.Metadata.Name}
	newValue, ok := types[head.APIVersion+"/"+head.Kind]
	if !ok {
		return o, fmt.Errorf("%s: no type for apiVersion %q kind %q", o.ID(), head.APIVersion, head.Kind)
	}
	o.Value = newValue()
	strict, err := json.UnmarshalStrict(raw, o.Value, json.DisallowDuplicateFields, json.DisallowUnknownFields)
	if err != nil {
		return o, fmt.Errorf("%s: %w", o.ID(), err)
	}
	if len(strict) > 0 {
		return o, fmt.Errorf("%s: %w", o.ID(), errors.Join(strict...))
	}
	return o, nil
}
