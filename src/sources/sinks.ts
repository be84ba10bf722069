import type { Attributes, AttributeValue, Span } from '../core/index.js';
import type { PolicySink } from '../policies/index.js';
import type { ConnectorRegistry } from './connectors/index.js';
import { API_VERSION, KIND, type ParsedSource, parseSource } from './resource.js';

/**
 * The `trace_feedback` sink: a policy's scores of *pushed* traces (OTLP, the logging SDK) written
 * back to the MLflow, Phoenix or Langfuse store the trace was also exported to, through the same
 * queue, ledger, writer and outbound rules as a source's write-back. Each sink of a policy is
 * addressed as a source named `@sink/<policy>/<index>`, so the ledger's key (source, trace,
 * policy, metric) and the writer need nothing new. Traces a source pulled never go to a sink: the
 * source's own write-back is their way back, so no score is written twice.
 */

export const SINK_PREFIX = '@sink/';

/** The write-back "source" of the `index`th sink of `policy`. */
export function sinkKey(policy: string, index: number): string {
  return `${SINK_PREFIX}${policy}/${index}`;
}

/** The policy and index a sink key names, or undefined for a source's name. */
export function parseSinkKey(key: string): { policy: string; index: number } | undefined {
  const m = /^@sink\/([^/]+)\/(\d+)$/.exec(key);
  return m === null ? undefined : { policy: m[1] as string, index: Number(m[2]) };
}

/**
 * A sink as the source it writes like: its connection under the policy's name, write-back on.
 * Throws SOURCE_INVALID (paths under `spec.`) when the connector refuses it.
 */
export function sinkSource(
  policy: string,
  sink: PolicySink,
  connectors?: ConnectorRegistry,
): ParsedSource {
  const { type: _type, ...connection } = sink;
  return parseSource(
    {
      apiVersion: API_VERSION,
      kind: KIND,
      metadata: { name: policy },
      spec: { ...connection, writeBack: { enabled: true } },
    },
    connectors,
  );
}

/** The attribute MLflow's own instrumentation puts on its spans: the trace's id in MLflow. */
export const MLFLOW_TRACE_ID_ATTRIBUTE = 'mlflow.traceRequestId';

/**
 * MLflow trace ids: `tr-<32 hex>` (open source), `trace:/<catalog.schema>/<32 hex>` (Unity
 * Catalog), or the bare 32 hex of MLflow 2.x. Anything else is not taken as an id.
 */
const MLFLOW_TRACE_ID = /^(?:tr-[0-9a-f]{32}|trace:\/[^/\s]{1,255}\/[0-9a-f]{32}|[0-9a-f]{32})$/i;

/**
 * The id a pushed trace has in a store it was exported to: for MLflow, `mlflowId` (the trace's
 * own `mlflow.traceRequestId`, mlflowTraceIdIn) when it has one, else `tr-<trace id>`, MLflow's
 * id of a trace received over OTLP. Phoenix and Langfuse keep the OpenTelemetry trace id.
 */
export function feedbackStoreId(connector: string, traceId: string, mlflowId?: string): string {
  if (connector !== 'mlflow') return traceId;
  return mlflowId ?? `tr-${traceId}`;
}

/**
 * The first MLflow trace id among attribute sets (a span's attributes, then its resource; root
 * span first): MLflow's tracing library puts `mlflow.traceRequestId` on every span it makes,
 * JSON-quoted, and a root span of other instrumentation may sit above them.
 */
export function mlflowTraceIdIn(carriers: Iterable<Attributes | undefined>): string | undefined {
  for (const attributes of carriers) {
    const id = mlflowTraceId(attributes);
    if (id !== undefined) return id;
  }
  return undefined;
}

/** A trace's spans as mlflowTraceIdIn reads them: the root span first, each span's own first. */
export function spanCarriers(
  spans: readonly Pick<Span, 'parentSpanId' | 'attributes' | 'resource'>[],
): Attributes[] {
  const rootFirst = [
    ...spans.filter((s) => s.parentSpanId === ''),
    ...spans.filter((s) => s.parentSpanId !== ''),
  ];
  return rootFirst.flatMap((s) => [s.attributes, s.resource]);
}

function mlflowTraceId(attributes: Attributes | undefined): string | undefined {
  let value = attributes?.[MLFLOW_TRACE_ID_ATTRIBUTE];
  if (typeof value === 'string' && value.startsWith('"')) {
    try {
      value = JSON.parse(value) as unknown as AttributeValue;
    } catch {
      return undefined;
    }
  }
  return typeof value === 'string' && MLFLOW_TRACE_ID.test(value) ? value : undefined;
}
