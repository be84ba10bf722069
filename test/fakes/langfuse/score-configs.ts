import { randomUUID } from 'node:crypto';

/**
 * Langfuse's score configs, as the fake serves them (v4.16.0:
 * `web/src/features/public-api/{types,server}/score-configs*.ts`,
 * `packages/shared/src/domain/score-configs.ts`, `validateAndInflateScore.ts`): names of 1–35
 * letters, digits, `_ . ( ) -` and spaces, not unique; BOOLEAN configs get the categories
 * True/1 and False/0; CATEGORICAL ones need unique labels and values; a PATCH merges the given
 * fields and checks the result. A score that names a config takes the config's name and must
 * agree with it: same data type, not archived, a number within its range, a label among its
 * categories. Each rule broken is a problem string (the fake answers 400 and records it).
 */

export type ConfigDataType = 'NUMERIC' | 'BOOLEAN' | 'CATEGORICAL' | 'TEXT';

export interface Category {
  label: string;
  value: number;
}

export interface FakeScoreConfig {
  id: string;
  name: string;
  projectId: string;
  dataType: ConfigDataType;
  isArchived: boolean;
  minValue?: number | null;
  maxValue?: number | null;
  categories?: Category[] | null;
  createdAt: string;
  updatedAt: string;
}

const NAME = /^[\p{L}\p{N}_ .()-]{1,35}$/u;
const BOOLEAN_CATEGORIES: Category[] = [
  { label: 'True', value: 1 },
  { label: 'False', value: 0 },
];

/** What Langfuse's config schema says about a config (after a create or a merged update). */
function configProblems(c: Omit<FakeScoreConfig, 'id' | 'createdAt' | 'updatedAt'>): string[] {
  const problems: string[] = [];
  if (!NAME.test(c.name)) problems.push('name: 1-35 letters, digits, _ . ( ) - or spaces');
  const ranged = c.minValue != null || c.maxValue != null;
  const categories = c.categories ?? undefined;
  switch (c.dataType) {
    case 'NUMERIC':
      if (categories !== undefined) problems.push('a NUMERIC config has no categories');
      if (c.minValue != null && c.maxValue != null && c.maxValue <= c.minValue) {
        problems.push('Maximum value must be greater than Minimum value');
      }
      break;
    case 'CATEGORICAL': {
      if (ranged) problems.push('a CATEGORICAL config has no range');
      if (categories === undefined) {
        problems.push('a CATEGORICAL config needs categories');
        break;
      }
      const labels = new Set(categories.map((x) => x.label));
      const values = new Set(categories.map((x) => x.value));
      if (labels.size !== categories.length || values.size !== categories.length) {
        problems.push('category labels and values must be unique');
      }
      if (categories.some((x) => x.label === '')) problems.push('a category label is not empty');
      break;
    }
    case 'BOOLEAN':
      if (JSON.stringify(categories) !== JSON.stringify(BOOLEAN_CATEGORIES)) {
        problems.push('Boolean data type must have exactly 2 categories.');
      }
      break;
    case 'TEXT':
      if (ranged || categories !== undefined)
        problems.push('a TEXT config has no range or categories');
      break;
  }
  return problems;
}

export class FakeScoreConfigs {
  readonly configs = new Map<string, FakeScoreConfig>();

  constructor(private readonly now: () => number) {}

  /** GET: newest first, `page` from 1, `limit` 1–100 (default 50). */
  list(query: URLSearchParams): { data: FakeScoreConfig[]; meta: Record<string, number> } | string {
    const page = Number(query.get('page') ?? '1');
    const limit = Number(query.get('limit') ?? '50');
    if (!Number.isInteger(page) || page < 1) return 'page is an integer from 1';
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) return 'limit is 1 to 100';
    const all = [...this.configs.values()].sort(
      (a, b) => b.createdAt.localeCompare(a.createdAt) || b.id.localeCompare(a.id),
    );
    return {
      data: all.slice((page - 1) * limit, page * limit),
      meta: { page, limit, totalItems: all.length, totalPages: Math.ceil(all.length / limit) },
    };
  }

  /** POST: the new config, or the problems with it. */
  create(body: Record<string, unknown>): FakeScoreConfig | string[] {
    const dataType = body.dataType as ConfigDataType;
    if (dataType === 'BOOLEAN' && body.categories != null) {
      return ['categories are set by Langfuse for BOOLEAN configs'];
    }
    const at = new Date(this.now()).toISOString();
    const config: FakeScoreConfig = {
      id: randomUUID(),
      name: String(body.name),
      projectId: 'fake-project',
      dataType,
      isArchived: false,
      createdAt: at,
      updatedAt: at,
      ...(body.minValue == null ? {} : { minValue: body.minValue as number }),
      ...(body.maxValue == null ? {} : { maxValue: body.maxValue as number }),
      ...(dataType === 'BOOLEAN'
        ? { categories: BOOLEAN_CATEGORIES }
        : body.categories == null
          ? {}
          : { categories: body.categories as Category[] }),
    };
    const problems = configProblems(config);
    if (problems.length > 0) return problems;
    this.configs.set(config.id, config);
    return config;
  }

  /** PATCH: the updated config, undefined when there is none, or the problems. */
  update(id: string, body: Record<string, unknown>): FakeScoreConfig | undefined | string[] {
    const existing = this.configs.get(id);
    if (existing === undefined) return undefined;
    if (Object.keys(body).length === 0) {
      return ['Request body cannot be empty. At least one field must be provided for update.'];
    }
    const given = Object.fromEntries(Object.entries(body).filter(([, v]) => v != null));
    const merged: FakeScoreConfig = {
      ...existing,
      ...given,
      updatedAt: new Date(this.now()).toISOString(),
    };
    const problems = configProblems(merged);
    if (problems.length > 0) return problems;
    this.configs.set(id, merged);
    return merged;
  }

  /** A score naming `configId`: the name it takes, what Langfuse refuses, or undefined (no such config). */
  checkScore(
    configId: string,
    score: { dataType?: string; value: unknown },
  ): { name: string; dataType: ConfigDataType } | undefined | string[] {
    const config = this.configs.get(configId);
    if (config === undefined) return undefined;
    const problems: string[] = [];
    if (score.dataType !== undefined && score.dataType !== config.dataType) {
      problems.push(`Data type mismatch based on config: expected ${config.dataType}`);
    }
    if (config.isArchived) problems.push('Config is archived');
    const { value } = score;
    switch (config.dataType) {
      case 'NUMERIC':
        if (typeof value !== 'number') problems.push('value is a number');
        else if (
          (config.minValue != null && value < config.minValue) ||
          (config.maxValue != null && value > config.maxValue)
        ) {
          problems.push('value is outside the config range');
        }
        break;
      case 'BOOLEAN':
        if (value !== 0 && value !== 1) problems.push('value is 0 or 1');
        break;
      case 'CATEGORICAL':
        if (!(config.categories ?? []).some((c) => c.label === value)) {
          problems.push('value is not a category of the config');
        }
        break;
      case 'TEXT':
        if (typeof value !== 'string') problems.push('value is a string');
        break;
    }
    return problems.length > 0 ? problems : { name: config.name, dataType: config.dataType };
  }
}
