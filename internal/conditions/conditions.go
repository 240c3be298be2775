// Package conditions names winready's conditions and reasons and derives the
// summary phase from them. Ready, Reconciling and Stalled follow the kstatus
// conventions so that Flux, Argo CD and `kubectl wait` understand the object.
package conditions

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/winready/winready/api/v1alpha1"
)

// Condition types.
const (
	Ready       = "Ready"
	Reconciling = "Reconciling"
	Stalled     = "Stalled"
	// PreflightPassed is True when every compatibility check passed or warned.
	PreflightPassed = "PreflightPassed"
	// RollbackAllowed is False while Windows nodes exist.
	RollbackAllowed = "RollbackAllowed"
	// CalicoHealthy is False while a TigeraStatus is Degraded.
	CalicoHealthy = "CalicoHealthy"
	// DirectAPIServerAddress is False when the services endpoint is a DNS name.
	DirectAPIServerAddress = "DirectAPIServerAddress"
	// OriginalsRecorded says where the originals a rollback restores come
	// from: recorded now, or read back from the durable record.
	OriginalsRecorded = "OriginalsRecorded"
)

// Reasons.
const (
	ReasonProgressing              = "Progressing"
	ReasonWaitingForCalico         = "WaitingForCalico"
	ReasonMigrated                 = "Migrated"
	ReasonRolledBack               = "RolledBack"
	ReasonNothingToRollBack        = "NothingToRollBack"
	ReasonPaused                   = "Paused"
	ReasonDryRun                   = "DryRun"
	ReasonAwaitingApproval         = "AwaitingApproval"
	ReasonConflictingManager       = "ConflictingManager"
	ReasonPreflightFailed          = "PreflightFailed"
	ReasonNetworkProbeFailed       = "NetworkProbeFailed"
	ReasonChecksPassed             = "ChecksPassed"
	ReasonChecksPassedWithWarnings = "ChecksPassedWithWarnings"
	ReasonInstallationNotFound     = "InstallationNotFound"
	ReasonCalicoAPIUnavailable     = "CalicoAPIUnavailable"
	// ReasonCalicoAPIServerUnavailable: the aggregated Calico API server
	// answers 503 (its APIService is not Available); it comes back by itself.
	ReasonCalicoAPIServerUnavailable = "CalicoAPIServerUnavailable"
	ReasonStepTimeout                = "StepTimeout"
	ReasonDetectionFailed            = "DetectionFailed"
	// ReasonAPIServerAddressUnproven: the address to write for calico-node failed
	// the TLS check against the cluster CA.
	ReasonAPIServerAddressUnproven = "APIServerAddressUnproven"
	ReasonCalicoDegraded           = "CalicoDegraded"
	ReasonAllComponentsHealthy     = "AllComponentsHealthy"
	ReasonWindowsNodesPresent      = "WindowsNodesPresent"
	ReasonNoWindowsNodes           = "NoWindowsNodes"
	ReasonAddress                  = "Address"
	ReasonHostname                 = "Hostname"
	// ReasonRetryingAfterError: a read or write failed (a server error, a timeout, a
	// denial); it is retried with a capped backoff, never turned into a stall.
	ReasonRetryingAfterError = "RetryingAfterError"
	// ReasonOriginalsUnsafe: the cluster already looks migrated and the
	// durable record of the originals is missing or disagrees.
	ReasonOriginalsUnsafe = "OriginalsUnsafe"
	ReasonRecorded        = "Recorded"
	// ReasonPodNetworkCheckFailed: the pod network is worse after a step
	// than before the first change.
	ReasonPodNetworkCheckFailed = "PodNetworkCheckFailed"
	ReasonRestoredFromRecord    = "RestoredFromRecord"
	// ReasonOriginalsIncomplete: the originals, recorded by an earlier
	// winready, lack a value the rollback must restore and the cluster cannot
	// tell it; a person supplies it in the record.
	ReasonOriginalsIncomplete = "OriginalsIncomplete"
	// ReasonForeignRecord: the record of the originals was not written by
	// this WindowsReadiness (one deleted and applied again, an earlier
	// winready, or anyone who could create it while none existed): neither
	// direction changes anything from it until a person reads what it holds
	// and adds ForeignRecord to spec.preflight.acknowledge, or deletes it.
	ReasonForeignRecord = "ForeignRecord"
	// ReasonMaxUnavailableTooHigh: spec.rollout.maxUnavailable would take the
	// pod network from too many nodes at once.
	ReasonMaxUnavailableTooHigh = "MaxUnavailableTooHigh"
	// ReasonRefusedByAPIServer: the API server refused a write for good (Forbidden,
	// Invalid): trying again changes nothing until a person fixes what it
	// names (RBAC, an admission policy, the object).
	ReasonRefusedByAPIServer = "RefusedByAPIServer"
	// ReasonRevertingStep: the pod network got worse after a step and
	// spec.podNetworkCheck.onFailure is Revert: the step is being taken back.
	ReasonRevertingStep = "RevertingStep"
	// ReasonCanaryFailed: the pod network check between the canary's nodes
	// (the first on the new calico-node) and the others failed; the changes
	// that started the rollout were taken back.
	ReasonCanaryFailed = "CanaryFailed"
)

// CalicoNodeManaged is False while calico-node carries the Tigera
// operator's ignore annotation set by someone other than winready: nothing
// the migration changes (nor a Calico upgrade) reaches the nodes then. It is
// absent while the operator manages calico-node or winready's own hold is on.
const (
	CalicoNodeManaged       = "CalicoNodeManaged"
	ReasonCalicoNodeIgnored = "CalicoNodeIgnored"
)

// WindowsNodesHealthy sums up, once the cluster is Ready, how the Windows
// nodes join; its reasons follow.
const (
	WindowsNodesHealthy        = "WindowsNodesHealthy"
	ReasonWindowsNodesJoined   = "WindowsNodesJoined"
	ReasonWindowsNodesJoining  = "WindowsNodesJoining"
	ReasonWindowsNodeNotJoined = "WindowsNodeNotJoined"
)

// Reasons of the Events that tell what happened; no step stops on them.
const (
	ReasonStepStarted            = "StepStarted"
	ReasonStepFinished           = "StepFinished"
	ReasonValueReverted          = "ValueReverted"
	ReasonOriginalsRecorded      = "OriginalsRecorded"
	ReasonNetworkProbeStarted    = "NetworkProbeStarted"
	ReasonNetworkProbeStopped    = "NetworkProbeStopped"
	ReasonNetworkProbePassed     = "NetworkProbePassed"
	ReasonNetworkProbeSkipped    = "NetworkProbeSkipped"
	ReasonPodNetworkCheckStarted = "PodNetworkCheckStarted"
	ReasonPodNetworkCheckStopped = "PodNetworkCheckStopped"
	ReasonPodNetworkChecked      = "PodNetworkChecked"
	ReasonCalicoNodeReleased     = "CalicoNodeReleased"
	ReasonRolloutSpeedRestored   = "RolloutSpeedRestored"
	ReasonClaimsKept             = "ClaimsKept"
	ReasonCanaryChecking         = "CanaryChecking"
	ReasonCanaryPassed           = "CanaryPassed"
	ReasonCanarySkipped          = "CanarySkipped"
)

// Effect is what a reason means for the migration when a step stops on it.
type Effect int

// The effects, from least to most in need of a person.
const (
	// Informs: the reason describes a state; a step never stops on it.
	Informs Effect = iota
	// Waits: the step goes on by itself once the cluster catches up.
	Waits
	// Holds: the spec asked winready to wait (paused, approval); no person
	// is needed beyond the one who asked.
	Holds
	// Stalls: a person is needed; nothing more happens until the spec or a
	// watched object changes.
	Stalls
	// Completes: the spec's direction is reached; Ready is True.
	Completes
	// Rests: nothing is changed and nothing is wrong until the spec changes
	// (a dry run's plan).
	Rests
)

// catalogue says for every reason what it means. A reason missing here is a
// stall, and the package's tests fail on it.
var catalogue = map[string]Effect{
	ReasonProgressing: Waits, ReasonWaitingForCalico: Waits, ReasonRetryingAfterError: Waits, ReasonCalicoDegraded: Waits,
	ReasonCalicoAPIServerUnavailable: Waits, ReasonRevertingStep: Waits,
	ReasonPaused: Holds, ReasonAwaitingApproval: Holds, ReasonDryRun: Rests,
	ReasonConflictingManager: Stalls, ReasonPreflightFailed: Stalls, ReasonNetworkProbeFailed: Stalls,
	ReasonInstallationNotFound: Stalls, ReasonCalicoAPIUnavailable: Stalls, ReasonStepTimeout: Stalls,
	ReasonDetectionFailed: Stalls, ReasonWindowsNodesPresent: Stalls, ReasonPodNetworkCheckFailed: Stalls,
	ReasonMaxUnavailableTooHigh: Stalls, ReasonOriginalsIncomplete: Stalls, ReasonForeignRecord: Stalls, ReasonAPIServerAddressUnproven: Stalls,
	ReasonRefusedByAPIServer: Stalls,
	ReasonMigrated:           Completes, ReasonRolledBack: Completes, ReasonNothingToRollBack: Completes,
	ReasonWindowsNodesJoined: Informs, ReasonWindowsNodesJoining: Informs, ReasonWindowsNodeNotJoined: Informs,
	ReasonStepStarted: Informs, ReasonStepFinished: Informs, ReasonValueReverted: Informs, ReasonOriginalsRecorded: Informs,
	ReasonNetworkProbeStarted: Informs, ReasonNetworkProbeStopped: Informs, ReasonNetworkProbePassed: Informs,
	ReasonNetworkProbeSkipped: Informs, ReasonPodNetworkCheckStarted: Informs, ReasonPodNetworkCheckStopped: Informs,
	ReasonPodNetworkChecked: Informs, ReasonCalicoNodeReleased: Informs, ReasonCalicoNodeIgnored: Informs, ReasonRolloutSpeedRestored: Informs,
	ReasonClaimsKept: Informs, ReasonCanaryChecking: Informs, ReasonCanaryPassed: Informs, ReasonCanarySkipped: Informs,
	ReasonCanaryFailed: Stalls,
	ReasonChecksPassed: Informs, ReasonChecksPassedWithWarnings: Informs, ReasonAllComponentsHealthy: Informs,
	ReasonNoWindowsNodes: Informs, ReasonAddress: Informs, ReasonHostname: Informs,
	ReasonOriginalsUnsafe: Informs, ReasonRecorded: Informs, ReasonRestoredFromRecord: Informs,
}

// EffectOf is what a reason means; an unknown reason stalls, so that a
// person looks rather than winready going on.
func EffectOf(reason string) Effect {
	if e, ok := catalogue[reason]; ok {
		return e
	}
	return Stalls
}

// Set sets a condition at the object's generation.
func Set(wr *v1alpha1.WindowsReadiness, typ string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&wr.Status.Conditions, metav1.Condition{
		Type:               typ,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: wr.Generation,
	})
}

// IsTrue reports whether a condition is True.
func IsTrue(wr *v1alpha1.WindowsReadiness, typ string) bool {
	return meta.IsStatusConditionTrue(wr.Status.Conditions, typ)
}

// Phase derives the summary phase from the conditions and the direction.
// Precedence: a person is needed (Stalled) over paused over done over busy.
func Phase(wr *v1alpha1.WindowsReadiness) v1alpha1.Phase {
	rc := meta.FindStatusCondition(wr.Status.Conditions, Reconciling)
	switch {
	case IsTrue(wr, Stalled):
		return v1alpha1.PhaseStalled
	case rc != nil && rc.Reason == ReasonPaused:
		return v1alpha1.PhasePaused
	case rc != nil && rc.Reason == ReasonAwaitingApproval:
		return v1alpha1.PhaseAwaitingApproval
	}
	ready := meta.FindStatusCondition(wr.Status.Conditions, Ready)
	if ready != nil && ready.Reason == ReasonDryRun {
		return v1alpha1.PhasePlanned
	}
	// Done is done in the direction asked for: right after the direction
	// turns, the conditions still tell of the other direction's end.
	doneBy := func(reasons ...string) bool {
		return ready != nil && ready.Status == metav1.ConditionTrue && slices.Contains(reasons, ready.Reason)
	}
	if wr.Spec.Direction == v1alpha1.DirectionRollback {
		if doneBy(ReasonRolledBack, ReasonNothingToRollBack) {
			return v1alpha1.PhaseRolledBack
		}
		return v1alpha1.PhaseRollingBack
	}
	pf := meta.FindStatusCondition(wr.Status.Conditions, PreflightPassed)
	switch {
	case doneBy(ReasonMigrated):
		return v1alpha1.PhaseReady
	case rc == nil:
		return v1alpha1.PhasePending
	case pf == nil || pf.Status != metav1.ConditionTrue:
		return v1alpha1.PhasePreflight
	}
	return v1alpha1.PhaseMigrating
}
