import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  MlflowStoreFake,
  readBody,
  type StoredTrace,
  sendError,
  sendJson,
} from '../mlflow/store.js';
import { verifySigV4 } from './sigv4-verify.js';

/**
 * A fake SageMaker managed MLflow endpoint (README.md): the open-source MLflow 3.x trace routes
 * behind SageMaker's front end, which checks every request's Signature Version 4 (recomputed by
 * `sigv4-verify.ts`) for the ARN's region and signing name, and the routing header carrying the
 * ARN. A request that fails is answered 403 as the front end does and recorded in `violations`.
 */

export interface SageMakerFakeOptions {
  arn: string;
  region: string;
  service: 'sagemaker-mlflow' | 'sagemaker';
  routingHeader: 'x-mlflow-sm-tracking-server-arn' | 'x-sm-mlflow-app-arn';
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

export class SageMakerFake {
  readonly store = new MlflowStoreFake();
  readonly violations = this.store.violations;
  /** Requests refused by the signature check (a wrong key is refused, not a violation). */
  readonly refused: string[] = [];
  /** The host clients address, when a proxy in between rewrites `Host`. */
  signedHost: string | undefined;
  private readonly experiments = new Map<string, string>();
  url = '';

  private constructor(
    private readonly server: Server,
    readonly options: SageMakerFakeOptions,
  ) {}

  static async start(options: SageMakerFakeOptions): Promise<SageMakerFake> {
    let fake: SageMakerFake | undefined;
    const server = createServer((req, res) => {
      fake?.request(req, res).catch((err: unknown) => {
        fake?.violations.push(`fake error: ${String(err)}`);
        sendError(res, 500, 'INTERNAL_ERROR', 'fake failed');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    fake = new SageMakerFake(server, options);
    fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return fake;
  }

  addExperiment(id: string, name: string): void {
    this.experiments.set(id, name);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async request(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readBody(req);
    const o = this.options;
    const keys = new Map([
      [
        o.accessKeyId,
        {
          secret: o.secretAccessKey,
          ...(o.sessionToken === undefined ? {} : { sessionToken: o.sessionToken }),
        },
      ],
    ]);
    const wrong = verifySigV4(req.method ?? 'GET', req.url ?? '/', req.headers, body, {
      region: o.region,
      service: o.service,
      keys,
      mustSign: [o.routingHeader],
      host: this.signedHost ?? String(req.headers.host),
      now: Date.now(),
    });
    if (wrong !== undefined) {
      this.refused.push(wrong);
      if (wrong !== 'unknown access key') this.violations.push(`sigv4: ${wrong}`);
      return sendJson(res, 403, {
        message: 'The request signature we calculated does not match the signature you provided.',
      });
    }
    if (req.headers[o.routingHeader] !== o.arn) {
      this.violations.push('routing header missing or not the ARN');
      return sendJson(res, 404, { message: 'no such tracking server' });
    }
    const url = new URL(req.url ?? '/', 'http://sagemaker');
    const json = body.length === 0 ? {} : (JSON.parse(body.toString()) as Record<string, unknown>);
    this.route(req.method ?? 'GET', url, json, res);
  }

  private route(method: string, url: URL, json: Record<string, unknown>, res: ServerResponse) {
    const key = `${method} ${url.pathname}`;
    const arg = (m: RegExpExecArray, i: number) => decodeURIComponent(m[i] as string);
    const routes: [RegExp, (m: RegExpExecArray) => unknown][] = [
      [/^GET \/api\/2\.0\/mlflow\/experiments\/get-by-name$/, () => this.byName(url, res)],
      [/^GET \/api\/2\.0\/mlflow\/experiments\/get$/, () => this.byId(url, res)],
      [/^POST \/api\/3\.0\/mlflow\/traces\/search$/, () => this.search(json, res)],
      [/^GET \/api\/3\.0\/mlflow\/traces\/batchGet$/, () => this.batchGet(url, res)],
      [/^GET \/api\/3\.0\/mlflow\/traces\/([^/]+)$/, (m) => this.info(arg(m, 1), res)],
      [
        /^POST \/api\/3\.0\/mlflow\/traces\/([^/]+)\/assessments$/,
        (m) => this.create(arg(m, 1), json, res),
      ],
      [
        /^PATCH \/api\/3\.0\/mlflow\/traces\/([^/]+)\/assessments\/([^/]+)$/,
        (m) => this.update(arg(m, 1), arg(m, 2), json, res),
      ],
    ];
    for (const [pattern, handle] of routes) {
      const m = pattern.exec(key);
      if (m !== null) {
        handle(m);
        return;
      }
    }
    sendError(res, 404, 'ENDPOINT_NOT_FOUND', 'No API found');
  }

  private experimentAnswer(res: ServerResponse, id: string | undefined) {
    if (id === undefined) {
      return sendError(res, 404, 'RESOURCE_DOES_NOT_EXIST', 'Could not find experiment');
    }
    sendJson(res, 200, {
      experiment: { experiment_id: id, name: this.experiments.get(id), lifecycle_stage: 'active' },
    });
  }

  private byName(url: URL, res: ServerResponse) {
    const name = url.searchParams.get('experiment_name');
    this.experimentAnswer(res, [...this.experiments].find(([, n]) => n === name)?.[0]);
  }

  private byId(url: URL, res: ServerResponse) {
    const id = url.searchParams.get('experiment_id') ?? '';
    this.experimentAnswer(res, this.experiments.has(id) ? id : undefined);
  }

  private search(json: Record<string, unknown>, res: ServerResponse) {
    const ids = (
      (Array.isArray(json.locations) ? json.locations : []) as Record<string, unknown>[]
    ).map((l) =>
      String((l.mlflow_experiment as { experiment_id?: unknown } | undefined)?.experiment_id),
    );
    const out = this.store.search(
      ids,
      json.filter,
      json.max_results,
      json.order_by,
      json.page_token,
    );
    if ('error' in out) {
      this.violations.push(`search: ${out.error}`);
      return sendError(res, 400, 'INVALID_PARAMETER_VALUE', out.error);
    }
    if (out.hits.length === 0) return sendJson(res, 200, {});
    sendJson(res, 200, {
      traces: out.hits.map((t) => this.store.info(t)),
      ...(out.next === undefined ? {} : { next_page_token: out.next }),
    });
  }

  private batchGet(url: URL, res: ServerResponse) {
    const entries = url.searchParams
      .getAll('trace_ids')
      .map((id) => this.store.traces.get(id))
      .filter((t): t is StoredTrace => t !== undefined)
      .map((t) => this.store.batchEntry(t));
    sendJson(res, 200, `{"traces": [${entries.join(', ')}]}`);
  }

  private trace(id: string, res: ServerResponse): StoredTrace | undefined {
    const t = this.store.traces.get(id);
    if (t === undefined) sendError(res, 404, 'RESOURCE_DOES_NOT_EXIST', 'Trace not found');
    return t;
  }

  private info(id: string, res: ServerResponse) {
    const t = this.trace(id, res);
    if (t !== undefined) sendJson(res, 200, { trace: { trace_info: this.store.info(t) } });
  }

  private create(id: string, json: Record<string, unknown>, res: ServerResponse) {
    const t = this.trace(id, res);
    if (t !== undefined) this.store.answerV3Create(t, json, res);
  }

  private update(
    id: string,
    assessmentId: string,
    json: Record<string, unknown>,
    res: ServerResponse,
  ) {
    const t = this.trace(id, res);
    if (t !== undefined) this.store.answerV3Update(t, assessmentId, json, res);
  }
}
