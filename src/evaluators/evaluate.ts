import { z } from 'zod';
import {
  describeDetails,
  type EvalRecord,
  issuesToDetails,
  RecordSchema,
  type Result,
} from '../core/index.js';
import type { EvaluatorFactory, Judge, Need, PluginOrigin, ScoreSpec } from './contract.js';
import { EvaluatorErrors } from './error-codes.js';
import type { EvaluatorRegistry } from './registry.js';
import {
  bindEvaluators,
  type EvaluationObserver,
  type EvaluatorInstance,
  EvaluatorRefSchema,
  runEvaluators,
} from './runner.js';

/** Direct evaluation: records plus evaluator references in, results per record out. */

export const EvaluateRequestSchema = z.strictObject({
  project: z.string().min(1).optional(),
  judge: z.string().min(1).optional(),
  /** Validated one by one so errors name the record index. */
  records: z.array(z.unknown()).min(1),
  evaluators: z.array(EvaluatorRefSchema).min(1),
});
export type EvaluateRequest = z.infer<typeof EvaluateRequestSchema>;

/** An evaluator type as the API lists it: its manifest, params as JSON Schema. */
export interface EvaluatorTypeView {
  type: string;
  description: string;
  needs: readonly Need[];
  scores: readonly ScoreSpec[];
  cheap: boolean;
  params: Record<string, unknown>;
  /** Plug-in evaluators only: the plug-in and the sha256 of its module and manifest. */
  plugin?: Omit<PluginOrigin, 'paramsSchema'>;
}

export interface RecordResults {
  recordId: string;
  results: Result[];
}

export interface EvaluationServiceDeps {
  registry: EvaluatorRegistry;
  judges: ReadonlyMap<string, Judge>;
  defaultJudge?: string;
  observer?: EvaluationObserver;
  /** Called with an evaluator's exception (for the server log); never shown to callers. */
  onError?: (err: unknown, evaluator: string) => void;
  maxRecords: number;
}

/** Records evaluated at once when an evaluator waits on a judge. */
const CONCURRENCY = 16;

export interface PreparedEvaluation {
  records: EvalRecord[];
  instances: EvaluatorInstance[];
  judge: Judge | undefined;
}

export class EvaluationService {
  constructor(private readonly deps: EvaluationServiceDeps) {}

  /** The evaluator types this service binds references against. */
  get registry(): EvaluatorRegistry {
    return this.deps.registry;
  }

  evaluatorTypes(): EvaluatorFactory[] {
    return this.deps.registry.list();
  }

  /** Every evaluator type as `GET /v1alpha1/evaluators` and `touchstone evaluators list` show it. */
  describeTypes(): EvaluatorTypeView[] {
    return this.evaluatorTypes().map(({ manifest }) => {
      const view: EvaluatorTypeView = {
        type: manifest.type,
        description: manifest.description,
        needs: manifest.needs,
        scores: manifest.scores,
        cheap: manifest.cheap,
        params: z.toJSONSchema(manifest.params, { io: 'input', unrepresentable: 'any' }),
      };
      if (manifest.plugin === undefined) return view;
      const { paramsSchema, ...origin } = manifest.plugin;
      return { ...view, params: paramsSchema, plugin: origin };
    });
  }

  /** The judge of this name (or the default); undefined when there is none (no throw). */
  findJudge(name: string | undefined): Judge | undefined {
    const wanted = name ?? this.deps.defaultJudge;
    return wanted === undefined ? undefined : this.deps.judges.get(wanted);
  }

  /** Resolves a judge name (or the default); undefined when none is configured. */
  resolveJudge(name: string | undefined, path = 'judge'): Judge | undefined {
    const wanted = name ?? this.deps.defaultJudge;
    if (wanted === undefined) return undefined;
    const judge = this.deps.judges.get(wanted);
    if (judge === undefined) {
      throw EvaluatorErrors.JUDGE_UNKNOWN(`no judge named "${wanted}" is configured`, {
        details: [{ path, message: `unknown judge "${wanted}"` }],
      });
    }
    return judge;
  }

  /** Validates everything (records, evaluators, params, judge) before anything runs. */
  prepare(request: EvaluateRequest): PreparedEvaluation {
    if (request.records.length > this.deps.maxRecords) {
      throw EvaluatorErrors.RECORD_INVALID(
        `too many records: ${request.records.length} (the limit is ${this.deps.maxRecords} per request)`,
        { details: [{ path: 'records', message: `at most ${this.deps.maxRecords}` }] },
      );
    }
    const instances = bindEvaluators(request.evaluators, this.deps.registry);
    const judge = this.resolveJudge(request.judge);
    const records = request.records.map((raw, i) => parseRecord(raw, i));
    return { records, instances, judge };
  }

  async run(prepared: PreparedEvaluation): Promise<RecordResults[]> {
    const { records, instances, judge } = prepared;
    const ctx = judge === undefined ? {} : { judge };
    const onError = (err: unknown, inst: EvaluatorInstance) => this.deps.onError?.(err, inst.name);
    const out: RecordResults[] = new Array(records.length);
    let next = 0;
    const worker = async () => {
      while (next < records.length) {
        const i = next++;
        const record = records[i] as EvalRecord;
        out[i] = {
          recordId: record.id,
          results: await runEvaluators(record, instances, ctx, this.deps.observer, onError),
        };
      }
    };
    const anyJudge = instances.some((inst) => inst.needsJudge);
    await Promise.all(Array.from({ length: anyJudge ? CONCURRENCY : 1 }, worker));
    return out;
  }

  async evaluate(request: EvaluateRequest): Promise<RecordResults[]> {
    return this.run(this.prepare(request));
  }
}

/** Parses one record; errors name `records[i].<field>`. Records without an id get their index. */
export function parseRecord(raw: unknown, index: number): EvalRecord {
  const parsed = RecordSchema.safeParse(raw);
  if (!parsed.success) {
    const details = issuesToDetails(parsed.error.issues, `records[${index}]`);
    throw EvaluatorErrors.RECORD_INVALID(
      `record ${index} is invalid: ${describeDetails(details)}`,
      { details },
    );
  }
  return { ...parsed.data, id: parsed.data.id ?? String(index) };
}
