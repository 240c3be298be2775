package calico

// ClassifyPatchError is classifyPatchError for the tests of package
// calico_test: they start their control plane with test/kit, which imports
// this package, so they cannot be in it.
var ClassifyPatchError = classifyPatchError
