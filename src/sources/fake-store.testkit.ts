import type { Span } from '../core/index.js';
import type {
  FetchedTrace,
  ListPage,
  ListQuery,
  TraceHeader,
  TraceStoreConnector,
  WriteBackItem,
  WriteBackOutcome,
} from './connector.js';

/**
 * A trace store double for the manager's tests: a connector only lists, fetches and writes back,
 * so the manager's rules are tested once for every store against it.
 */

export interface FakeTrace extends TraceHeader {
  spans: Span[];
}

export class FakeStore implements TraceStoreConnector {
  traces: FakeTrace[] = [];
  fetched: string[] = [];
  written: WriteBackItem[] = [];
  failListAfterPages = Number.POSITIVE_INFINITY;
  failure: Error | undefined;
  /** The listing never answers (until the pull's budget aborts it). */
  hang = false;
  /** Real milliseconds every listing takes (a store running a search), cut short by its signal. */
  listDelayMs = 0;
  /** While set, every fetch waits for it (tests line concurrent fetches up). */
  fetchGate: Promise<void> | undefined;
  /** Fetches that reached the gate. */
  gated = 0;
  /** Store ids whose spans the store cannot serve. */
  missing = new Set<string>();
  /** Runs before every listing answers (a slow store moves the test's clock here). */
  beforeList: (() => void) | undefined;
  private pages = 0;
  private nextRemote = 1;

  add(
    i: number,
    startMs: number,
    opts: {
      inProgress?: boolean;
      tool?: string;
      fail?: boolean;
      storeId?: string;
      /** The agent's answer (default `answer`). */
      output?: string;
    } = {},
  ): FakeTrace {
    const traceId = i.toString(16).padStart(32, '0');
    const ns = (ms: number) => `${BigInt(ms) * 1_000_000n}`;
    const span = (
      id: string,
      parent: string,
      name: string,
      attributes: Record<string, string>,
      error = false,
    ): Span =>
      ({
        traceId,
        spanId: id,
        parentSpanId: parent,
        name,
        kind: 1,
        startTimeUnixNano: ns(startMs),
        endTimeUnixNano: ns(startMs + 1000),
        attributes,
        resource: { 'service.name': 'agent' },
        scope: { name: 'fake', version: '1' },
        events: [],
        links: [],
        status: error ? { code: 2, message: 'boom' } : { code: 0, message: '' },
        droppedAttributesCount: 0,
      }) as unknown as Span;
    const t: FakeTrace = {
      storeId: opts.storeId ?? `tr-${traceId}`,
      traceId,
      startMs,
      ...(opts.inProgress ? {} : { endMs: startMs + 1000 }),
      inProgress: opts.inProgress ?? false,
      resource: { 'mlflow.tag.team': 'search' },
      spans: [
        span('00000000000000a1', '', 'agent', {
          'input.value': `question ${i}`,
          'output.value': opts.output ?? 'answer',
        }),
        span(
          '00000000000000a2',
          '00000000000000a1',
          `execute_tool ${opts.tool ?? 'search'}`,
          {
            'gen_ai.operation.name': 'execute_tool',
            'gen_ai.tool.name': opts.tool ?? 'search',
          },
          opts.fail === true,
        ),
      ],
    };
    this.traces.push(t);
    return t;
  }

  async check(): Promise<void> {}

  async list(q: ListQuery): Promise<ListPage> {
    this.pages++;
    this.beforeList?.();
    if (this.pages > this.failListAfterPages && this.failure !== undefined) throw this.failure;
    if (this.hang || this.listDelayMs > 0) {
      await new Promise((resolve, reject) => {
        if (!this.hang) setTimeout(resolve, this.listDelayMs);
        q.signal?.addEventListener('abort', () => reject(q.signal?.reason));
      });
    }
    const all = this.traces
      .filter((t) => t.startMs >= q.fromMs && t.startMs < q.toMs)
      .sort((a, b) => a.startMs - b.startMs);
    const offset = Number(q.pageToken ?? 0);
    const slice = all.slice(offset, offset + q.pageSize);
    return {
      traces: slice.map(({ spans: _s, ...h }) => h),
      ...(offset + q.pageSize < all.length ? { nextPageToken: String(offset + q.pageSize) } : {}),
    };
  }

  async fetch(headers: readonly TraceHeader[]): Promise<Map<string, FetchedTrace>> {
    if (this.fetchGate !== undefined) {
      this.gated++;
      await this.fetchGate;
    }
    const out = new Map<string, FetchedTrace>();
    for (const h of headers) {
      this.fetched.push(h.storeId);
      const t = this.traces.find((x) => x.storeId === h.storeId);
      out.set(
        h.storeId,
        t === undefined || this.missing.has(h.storeId)
          ? { missing: 'no spans' }
          : { spans: t.spans },
      );
    }
    return out;
  }

  async writeBack(items: readonly WriteBackItem[]): Promise<WriteBackOutcome[]> {
    this.written.push(...items);
    return items.map((i) =>
      i.remoteId === undefined
        ? { status: 'created', remoteId: `a-${this.nextRemote++}` }
        : { status: 'updated', remoteId: i.remoteId },
    );
  }
}
