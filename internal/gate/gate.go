// Package gate names the Windows join gate: a ValidatingAdmissionPolicy that
// rejects creating a Node labelled kubernetes.io/os=windows (or relabelling
// one) while the WindowsReadiness is not Ready, during and after a rollback,
// unless spec.windowsNodeGate is Disabled. It closes the race where a Windows
// node joins halfway through a migration or rollback.
//
// The policy and its binding are shipped in config/admission/gate.yaml and
// read the WindowsReadiness as their parameter, so the verdict follows the
// object's spec and phase without the manager writing any admission object.
package gate

// Name is the name of the policy and of its binding.
const Name = "winready-windows-node-gate"
