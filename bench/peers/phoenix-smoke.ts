/**
 * Standalone check of the Phoenix peer: `npx tsx bench/peers/phoenix-smoke.ts` posts a few small
 * agent traces (or PHOENIX_SMOKE_SPANS spans, e.g. 20000, in requests of 50 traces) and prints
 * what phoenixIngest returns.
 */
import { agentTrace, protobufBody, recordSpans } from '../../test/support/otel.js';
import { phoenixIngest } from './phoenix.js';

const TOTAL_SPANS = Number(process.env.PHOENIX_SMOKE_SPANS ?? 30);
const TRACES_PER_REQUEST = Number(process.env.PHOENIX_SMOKE_TRACES_PER_REQUEST ?? 50);
const IN_FLIGHT = Number(process.env.PHOENIX_SMOKE_IN_FLIGHT ?? 4);

const spansPerTrace = recordSpans({ 'service.name': 'probe' }, (t) => {
  agentTrace(t);
}).length;
const traces = Math.max(1, Math.ceil(TOTAL_SPANS / spansPerTrace));
const bodies: Buffer[] = [];
for (let done = 0; done < traces; done += TRACES_PER_REQUEST) {
  const count = Math.min(TRACES_PER_REQUEST, traces - done);
  const spans = recordSpans({ 'service.name': `smoke-${bodies.length % 5}` }, (t) => {
    for (let k = 0; k < count; k++) agentTrace(t, { fail: (done + k) % 10 === 0 });
  });
  bodies.push(protobufBody(spans));
}
console.log(
  `posting ${traces * spansPerTrace} spans in ${bodies.length} requests, ${IN_FLIGHT} in flight`,
);
const result = await phoenixIngest(bodies, { inFlight: IN_FLIGHT });
console.log(JSON.stringify(result, null, 2));
if ('skipped' in result) process.exitCode = 1;
