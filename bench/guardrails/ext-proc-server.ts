/**
 * The processor under bench, in its own process: an ext_proc server on the real guard engine with
 * one non-judge policy (PII, secrets, an RE2 deny list, injection heuristics, a CEL tool rule).
 * Prints its address on stdout, then serves until SIGTERM, when it prints (one JSON line) the guard
 * engine's decision times and the CPU time it used.
 */
import { OPEN_PRINCIPAL } from '../../src/auth/index.js';
import { createExtProcServer, GuardEngine } from '../../src/guardrails/index.js';

export const BENCH_POLICY = {
  checks: [
    {
      name: 'deny-tools',
      type: 'cel',
      action: 'reject',
      condition: 'mcp.tool.name == "delete_repo"',
    },
    { name: 'keys', type: 'secrets', action: 'reject' },
    {
      name: 'deny-words',
      type: 'regex',
      action: 'reject',
      patterns: ['(?i)drop\\s+table', 'rm -rf /'],
    },
    { name: 'injection', type: 'injection', action: 'reject' },
    { name: 'pii', type: 'pii', action: 'mask' },
  ],
};

const decisionSeconds: number[] = [];
const engine = new GuardEngine({
  observer: { onGuardDecision: (e) => decisionSeconds.push(e.seconds) },
  policies: {
    async get(project, name) {
      if (project !== 'default' || name !== 'mcp-tools') return undefined;
      const resource = {
        apiVersion: 'touchstone.dev/v1alpha1',
        kind: 'GuardPolicy',
        metadata: { name },
        spec: BENCH_POLICY,
      };
      return { resource, generation: 1 };
    },
  },
});
const server = await createExtProcServer({
  host: '127.0.0.1',
  port: 0,
  maxStreams: 1000,
  shutdownTimeoutMs: 1000,
  guard: engine,
  settings: {
    policy: 'mcp-tools',
    failOpen: false,
    maxBodyBytes: 2 * 1024 * 1024,
    maxBatch: 100,
    bodyTimeoutMs: 10_000,
    decisionTimeoutMs: 2_000,
  },
  authenticate: async () => OPEN_PRINCIPAL,
});
await server.start();
const cpu = process.cpuUsage();
process.stdout.write(`${server.address()}\n`);
process.once('SIGTERM', () => {
  const used = process.cpuUsage(cpu);
  const ms = decisionSeconds.map((s) => s * 1000);
  process.stdout.write(
    `${JSON.stringify({ decisionsMs: ms, cpuMs: (used.user + used.system) / 1000 })}\n`,
  );
  process.exit(0);
});
