// Package v1alpha1 contains the WindowsReadiness API.
// +kubebuilder:object:generate=true
// +groupName=winready.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the WindowsReadiness API.
	GroupVersion = schema.GroupVersion{Group: "winready.io", Version: "v1alpha1"}

	// SchemeBuilder registers the API types. It is apimachinery's, not
	// controller-runtime's, so that importing the API brings in no more than
	// apimachinery.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the API types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &WindowsReadiness{}, &WindowsReadinessList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
