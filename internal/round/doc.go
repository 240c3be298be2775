// Package round runs work that fans out to every Linux node: a round of
// agents, one per node, each testing a few peers and reporting what it saw.
// The UDP 4789 probe (internal/probe) and the pod network check
// (internal/podcheck) are its two users; each says only what its agents do
// (the DaemonSet's pod, the parameters P every agent gets, the result R each
// reports) and how their reports are judged. The lifecycle is the engine's:
// start (clean up what an earlier round left, start the agents), pair (give
// each agent its peers, at once or once the agents serve), collect (count
// the reports until all are in or the round's time is up), read the results
// against the plans, clean up, stop; a new rerun Token asks for a new round.
//
// # One object per agent, read by that agent alone
//
// Each agent's plan is a ConfigMap of its own, "<kind>-plan-<node>", holding
// its address, the addresses of its peers (those it tests, and those that
// test it), the round's window and the kind's parameters; its report is
// another, "<kind>-report-<node>". An agent watches its own plan by name and
// writes its own report: what it reads and writes is constant, whatever the
// size of the cluster, and no object grows with it. At 5,000 nodes with
// 253-character names a plan or a report is about a kilobyte.
//
// The other ways were weighed and left:
//   - One plan for all (what this replaced): every agent read every node's
//     entry, so traffic grew with the square of the cluster (0.5 GB per round
//     at 1,000 nodes), and with long node names the plan outgrew a ConfigMap.
//   - Sharded plans, a shard per k nodes: an agent still reads k entries, and
//     the 2 KB per agent the API server can afford at 5,000 nodes leaves k
//     about one.
//   - Peers computed by each agent from a seed and the node list: every agent
//     would read the list of every node, which is the quadratic traffic again
//     (agents do not watch Nodes today, and should not have to).
//
// A plan is written by the manager once per node (a create), a report by the
// agent (a create, and for a kind whose agents first say that they serve, an
// update): two or three writes a node, and one collection delete a kind.
//
// # Agents start together
//
// A plan carries the round's window, a start and an end on the manager's
// clock. An agent waits for the start and works until the end however late
// it came up, so a slow image pull on one node costs its peers nothing: they
// keep testing it until the end. An agent that comes up too late to work
// reports so, and counts as missing rather than as failed pairs.
//
// # Secrets
//
// A kind's agents may be given a random key per round (the UDP probe signs
// its packets with it). It is not in a plan, which agents of any kind may
// read, but in the Secret named after the kind, which RBAC lets only that
// kind's ServiceAccount get; the manager creates and deletes it and never
// reads it.
package round
