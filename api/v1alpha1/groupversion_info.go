// Package v1alpha1 contains the WindowsReadiness API.
// +kubebuilder:object:generate=true
// +groupName=winready.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the WindowsReadiness API.
	GroupVersion = schema.GroupVersion{Group: "winready.io", Version: "v1alpha1"}

	// SchemeBuilder registers the API types.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the API types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
