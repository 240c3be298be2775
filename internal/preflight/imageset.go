package preflight

import (
	"fmt"
	"slices"
	"strings"

	operatorv1 "github.com/tigera/operator/api/v1"

	"github.com/winready/winready/api/v1alpha1"
)

// CheckImageSet names the check of the ImageSet the Windows controller
// resolves its images through.
const CheckImageSet = "ImageSetWindowsImages"

// windowsImages are the images calico-node-windows is rendered from, as an
// ImageSet names them (the operator's components.CalicoImagePath + Image).
var windowsImages = []string{"calico/cni-windows", "calico/node-windows"}

// imageSetWindows fails when an ImageSet pins the images of the running
// Calico version but lists no Windows images: the Windows controller cannot
// resolve them and leaves calico-windows Degraded ("Error resolving ImageSet
// for components"), rendering nothing.
func imageSetWindows(in Inputs) v1alpha1.PreflightCheck {
	if len(in.ImageSets) == 0 {
		return result(CheckImageSet, v1alpha1.CheckPass, "no ImageSet: the Tigera operator uses image tags")
	}
	inst := in.Installation
	if inst == nil || inst.Status.CalicoVersion == "" || inst.Status.Variant.IsEnterprise() {
		return result(CheckImageSet, v1alpha1.CheckInfo, "ImageSets exist but the Installation reports no Calico (open source) version: not checked")
	}
	name := "calico-" + inst.Status.CalicoVersion
	var set *operatorv1.ImageSet
	for i := range in.ImageSets {
		if in.ImageSets[i].Name == name {
			set = &in.ImageSets[i]
		}
	}
	if set == nil {
		return result(CheckImageSet, v1alpha1.CheckInfo, "no ImageSet named %s for the running Calico version", name)
	}
	var missing []string
	for _, img := range windowsImages {
		if !slices.ContainsFunc(set.Spec.Images, func(i operatorv1.Image) bool { return i.Image == img }) {
			missing = append(missing, img)
		}
	}
	if len(missing) == 0 {
		return result(CheckImageSet, v1alpha1.CheckPass, "ImageSet %s lists %s", name, strings.Join(windowsImages, " and "))
	}
	var add []string
	for _, img := range missing {
		add = append(add, fmt.Sprintf("{image: %s, digest: sha256:<digest of %s:%s>}", img, img, inst.Status.CalicoVersion))
	}
	return result(CheckImageSet, v1alpha1.CheckFail,
		"ImageSet %s pins the images of Calico %s but lists no %s: the Tigera operator's Windows controller resolves calico-node-windows "+
			"through it and would stay Degraded (\"Error resolving ImageSet for components\") after BGP is off. Add to its spec.images %s",
		name, inst.Status.CalicoVersion, strings.Join(missing, " or "), strings.Join(add, ", "))
}
