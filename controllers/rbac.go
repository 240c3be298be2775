package controllers

// The manager's RBAC, generated into config/rbac/role.yaml by
// `make manifests`. The README's security section explains each rule.

// +kubebuilder:rbac:groups=winready.io,resources=windowsreadinesses,verbs=get;list;watch
// +kubebuilder:rbac:groups=winready.io,resources=windowsreadinesses/status,verbs=get;patch
// +kubebuilder:rbac:groups=operator.tigera.io,resources=installations,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=operator.tigera.io,resources=tigerastatuses,verbs=get;list;watch
// +kubebuilder:rbac:groups=projectcalico.org,resources=ipamconfigurations,verbs=get;create;patch;delete
// +kubebuilder:rbac:groups=projectcalico.org,resources=ippools;felixconfigurations;bgpconfigurations,verbs=get
// +kubebuilder:rbac:groups=projectcalico.org,resources=bgppeers;networkpolicies;globalnetworkpolicies;ipamblocks;ippools,verbs=list
// +kubebuilder:rbac:groups=crd.projectcalico.org,resources=ipamblocks,verbs=list
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=list
// +kubebuilder:rbac:groups=apps,namespace=calico-system,resources=daemonsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=daemonsets,verbs=list
// +kubebuilder:rbac:groups=networking.k8s.io,resources=servicecidrs,verbs=list
// +kubebuilder:rbac:groups=discovery.k8s.io,namespace=default,resources=endpointslices,verbs=list
// +kubebuilder:rbac:groups=events.k8s.io,namespace=default,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=apps,namespace=winready-system,resources=daemonsets,verbs=create;delete
// +kubebuilder:rbac:groups="",namespace=winready-system,resources=configmaps,verbs=get;list;watch;create;delete;deletecollection
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=tigera-operator,resources=configmaps,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",namespace=kube-system,resources=configmaps,resourceNames=kubeadm-config,verbs=get
// +kubebuilder:rbac:groups="",namespace=kube-system,resources=services,resourceNames=kube-dns,verbs=get
// +kubebuilder:rbac:groups="",namespace=kube-public,resources=configmaps,resourceNames=cluster-info,verbs=get
