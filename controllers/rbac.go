package controllers

// The manager's RBAC, generated into config/rbac/role.yaml by
// `make manifests`. docs/security.md explains each rule.
// Reads, updates and deletes of a single known object name it
// (resourceNames); a create request carries no name, and a list or watch
// only carries one when it selects metadata.name, so those stay unnamed.
// On admission objects the manager may only read its own policies and
// bindings by name (config/admission, which ships them): it makes no write
// before they all exist (internal/cli/bounds.go). A test holds the names to
// config/admission's.

// +kubebuilder:rbac:groups=winready.io,resources=windowsreadinesses,verbs=get;list;watch
// +kubebuilder:rbac:groups=winready.io,resources=windowsreadinesses/status,resourceNames=default,verbs=patch
// +kubebuilder:rbac:groups=winready.io,resources=windowsreadinesses,resourceNames=default,verbs=patch
// +kubebuilder:rbac:groups=operator.tigera.io,resources=installations,verbs=get;list;watch
// +kubebuilder:rbac:groups=operator.tigera.io,resources=installations,resourceNames=default,verbs=patch
// +kubebuilder:rbac:groups=operator.tigera.io,resources=tigerastatuses,verbs=get;list;watch
// +kubebuilder:rbac:groups=operator.tigera.io,resources=imagesets,verbs=list
// +kubebuilder:rbac:groups=apiregistration.k8s.io,resources=apiservices,resourceNames=v3.projectcalico.org,verbs=get
// +kubebuilder:rbac:groups=projectcalico.org,resources=ipamconfigurations,verbs=create
// +kubebuilder:rbac:groups=projectcalico.org,resources=ipamconfigurations,resourceNames=default,verbs=get;patch;delete
// +kubebuilder:rbac:groups=projectcalico.org,resources=ippools;felixconfigurations;bgpconfigurations,verbs=get
// +kubebuilder:rbac:groups=projectcalico.org,resources=bgppeers;networkpolicies;globalnetworkpolicies;ipamblocks;ippools,verbs=list
// +kubebuilder:rbac:groups=crd.projectcalico.org,resources=ipamblocks,verbs=list
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=list
// +kubebuilder:rbac:groups=apps,namespace=calico-system,resources=daemonsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,namespace=calico-system,resources=daemonsets,resourceNames=calico-node,verbs=patch
// +kubebuilder:rbac:groups=apps,namespace=calico-system,resources=deployments,resourceNames=calico-typha,verbs=get
// +kubebuilder:rbac:groups=apps,resources=daemonsets,verbs=list
// +kubebuilder:rbac:groups=networking.k8s.io,resources=servicecidrs,verbs=list
// +kubebuilder:rbac:groups=discovery.k8s.io,namespace=default,resources=endpointslices,verbs=list
// +kubebuilder:rbac:groups="",namespace=default,resources=services,resourceNames=kubernetes,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,namespace=default,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=tigera-operator,resources=configmaps,verbs=create
// +kubebuilder:rbac:groups="",namespace=tigera-operator,resources=configmaps,resourceNames=kubernetes-services-endpoint,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups="",namespace=winready-system,resources=configmaps,verbs=create
// +kubebuilder:rbac:groups="",namespace=winready-system,resources=configmaps,resourceNames=winready-originals,verbs=get;patch;delete
// +kubebuilder:rbac:groups="",namespace=winready-system,resources=configmaps,resourceNames=kube-root-ca.crt,verbs=get
// +kubebuilder:rbac:groups=apps,namespace=winready-probe,resources=daemonsets,verbs=create
// +kubebuilder:rbac:groups=apps,namespace=winready-probe,resources=daemonsets,resourceNames=winready-probe,verbs=delete
// +kubebuilder:rbac:groups="",namespace=winready-probe,resources=configmaps,verbs=create;list;watch;deletecollection
// +kubebuilder:rbac:groups="",namespace=winready-probe,resources=secrets,verbs=create
// +kubebuilder:rbac:groups="",namespace=winready-probe,resources=secrets,resourceNames=winready-probe,verbs=delete
// +kubebuilder:rbac:groups="",namespace=kube-system,resources=configmaps,resourceNames=kubeadm-config,verbs=get
// +kubebuilder:rbac:groups="",namespace=kube-system,resources=services,resourceNames=kube-dns;rke2-coredns-rke2-coredns,verbs=get
// +kubebuilder:rbac:groups="",namespace=kube-public,resources=configmaps,resourceNames=cluster-info,verbs=get
// +kubebuilder:rbac:groups="",namespace=calico-system,resources=pods,verbs=get;list;watch

// The metrics endpoint (internal/securemetrics) asks the API server who each
// scraper is and whether it may get /metrics (ClusterRole
// winready-metrics-reader, config/rbac); reviews are answered, not stored.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,resourceNames=winready-admin-changes;winready-manager-calico-node;winready-manager-calico-node-hold;winready-manager-events;winready-manager-installation;winready-manager-installation-spec;winready-manager-ipam;winready-manager-lease;winready-manager-record;winready-manager-record-create;winready-manager-services-endpoint;winready-manager-services-endpoint-spec;winready-manager-system;winready-manager-windowsreadiness;winready-probe-configmap-delete;winready-probe-daemonset;winready-probe-plans;winready-probe-reports;winready-probe-secret;winready-probe-service;winready-windows-node-gate;winready-windows-node-gate-calico,verbs=get
