package phase

// Steps is the migration in order. The Tigera operator rejects
// windowsDataplane HNS until strict affinity, VXLAN pools, the services
// endpoint and serviceCIDRs are in place, so HNS comes last. A rollback runs
// the list backwards.
func Steps() []Step {
	return []Step{
		StrictAffinity{},
		Encapsulation{},
		BGP{},
		ServicesEndpoint{},
		ServiceCIDRs{},
		WindowsDataplane{},
	}
}
