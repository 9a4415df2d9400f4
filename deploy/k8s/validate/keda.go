package validate

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The KEDA kinds (keda.sh/v1alpha1) Isle uses, mirroring KEDA v2's
// schema for the fields it has; a manifest field these types lack is an
// error, as it would be for the CRD's structural schema. Status is left
// out: manifests do not set it.

// ScaledObject scales a Deployment on external metrics (KEDA).
type ScaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ScaledObjectSpec `json:"spec"`
}

// ScaledObjectSpec is KEDA's ScaledObjectSpec.
type ScaledObjectSpec struct {
	ScaleTargetRef        *ScaleTarget    `json:"scaleTargetRef"`
	PollingInterval       *int32          `json:"pollingInterval,omitempty"`
	InitialCooldownPeriod *int32          `json:"initialCooldownPeriod,omitempty"`
	CooldownPeriod        *int32          `json:"cooldownPeriod,omitempty"`
	IdleReplicaCount      *int32          `json:"idleReplicaCount,omitempty"`
	MinReplicaCount       *int32          `json:"minReplicaCount,omitempty"`
	MaxReplicaCount       *int32          `json:"maxReplicaCount,omitempty"`
	Advanced              *AdvancedConfig `json:"advanced,omitempty"`
	Triggers              []ScaleTriggers `json:"triggers"`
	Fallback              *Fallback       `json:"fallback,omitempty"`
}

// ScaleTarget names the workload a ScaledObject scales.
type ScaleTarget struct {
	Name                   string `json:"name"`
	APIVersion             string `json:"apiVersion,omitempty"`
	Kind                   string `json:"kind,omitempty"`
	EnvSourceContainerName string `json:"envSourceContainerName,omitempty"`
}

// AdvancedConfig is KEDA's advanced section.
type AdvancedConfig struct {
	HorizontalPodAutoscalerConfig *HorizontalPodAutoscalerConfig `json:"horizontalPodAutoscalerConfig,omitempty"`
	RestoreToOriginalReplicaCount bool                           `json:"restoreToOriginalReplicaCount,omitempty"`
}

// HorizontalPodAutoscalerConfig tunes the HPA KEDA makes.
type HorizontalPodAutoscalerConfig struct {
	Name     string                                         `json:"name,omitempty"`
	Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
}

// ScaleTriggers is one scaler: its type, its metadata (free-form for the
// schema: Check reads the rabbitmq scaler's keys) and its credentials.
type ScaleTriggers struct {
	Type              string                         `json:"type"`
	Name              string                         `json:"name,omitempty"`
	UseCachedMetrics  bool                           `json:"useCachedMetrics,omitempty"`
	Metadata          map[string]string              `json:"metadata"`
	AuthenticationRef *AuthenticationRef             `json:"authenticationRef,omitempty"`
	MetricType        autoscalingv2.MetricTargetType `json:"metricType,omitempty"`
}

// AuthenticationRef names a TriggerAuthentication (or, with Kind, a
// ClusterTriggerAuthentication).
type AuthenticationRef struct {
	Name string `json:"name"`
	Kind string `json:"kind,omitempty"`
}

// Fallback is the replica count KEDA keeps while a scaler fails.
type Fallback struct {
	FailureThreshold int32  `json:"failureThreshold"`
	Replicas         int32  `json:"replicas"`
	Behavior         string `json:"behavior,omitempty"`
}

// TriggerAuthentication gives scalers their credentials.
type TriggerAuthentication struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              TriggerAuthenticationSpec `json:"spec"`
}

// TriggerAuthenticationSpec holds the credential sources Isle uses.
type TriggerAuthenticationSpec struct {
	SecretTargetRef []AuthSecretTargetRef `json:"secretTargetRef,omitempty"`
	Env             []AuthEnvironment     `json:"env,omitempty"`
}

// AuthSecretTargetRef maps a scaler parameter to a Secret's key.
type AuthSecretTargetRef struct {
	Parameter string `json:"parameter"`
	Name      string `json:"name"`
	Key       string `json:"key"`
}

// AuthEnvironment maps a scaler parameter to a container's variable.
type AuthEnvironment struct {
	Parameter     string `json:"parameter"`
	Name          string `json:"name"`
	ContainerName string `json:"containerName,omitempty"`
}
