-- Argo CD health of a WindowsReadiness, from the same conditions kstatus reads.
-- Install: argocd-cm data key resource.customizations.health.winready.io_WindowsReadiness.
local hs = { status = "Progressing", message = "waiting for the operator" }
if obj.status == nil or obj.status.conditions == nil then
  return hs
end
local generation = obj.metadata.generation or 0
local observed = obj.status.observedGeneration or 0
local ready, reconciling, stalled
for _, c in ipairs(obj.status.conditions) do
  if c.type == "Ready" then ready = c end
  if c.type == "Reconciling" then reconciling = c end
  if c.type == "Stalled" then stalled = c end
end
if stalled ~= nil and stalled.status == "True" and observed == generation then
  hs.status = "Degraded"
  hs.message = stalled.message
  return hs
end
-- A person holds the migration: paused, or a step awaits approval.
if reconciling ~= nil and reconciling.status == "True" then
  if reconciling.reason == "Paused" or reconciling.reason == "AwaitingApproval" then
    hs.status = "Suspended"
  end
  hs.message = reconciling.message
  return hs
end
if ready ~= nil and ready.status == "True" and observed == generation then
  hs.status = "Healthy"
  hs.message = ready.message
  return hs
end
-- A finished dry run: the plan is in status.plan, nothing is left to do.
if ready ~= nil and ready.reason == "DryRun" and observed == generation then
  hs.status = "Healthy"
  hs.message = ready.message
  return hs
end
if obj.status.message ~= nil then
  hs.message = obj.status.message
end
return hs
