import { LangfuseErrors } from './error-codes.js';
import type { LangfuseRest } from './rest.js';

/**
 * Langfuse takes a score of source `ANNOTATION` (a person's) only with a score config
 * (`configId`), and checks the score against it: the config's name and data type, not archived,
 * a number within its range, a label among its categories. A person's annotation written back is
 * therefore put under a config of its name and data type: one found among the project's configs
 * (`GET /api/public/score-configs`, every page, read once per batch), else one created (`POST`):
 * NUMERIC from 0 to 1 (the annotation range), BOOLEAN, or CATEGORICAL with the label as its first
 * category. A label the config lacks is added to its categories (`PATCH …/{configId}`), as a
 * person adding a category in Langfuse's settings would. Config names are not unique in Langfuse,
 * so another config of the same name and another data type (or a range that does not hold the
 * value) is left alone and ours is made beside it. Langfuse takes config names of at most 35
 * characters: a longer annotation name is refused (dead-lettered with a message saying so).
 */

export const SCORE_CONFIGS_PATH = '/api/public/score-configs';
/** The page size of the listing (Langfuse's maximum). */
const PAGE = 100;
/** Pages read at most (10,000 configs); a project with more is not searched further. */
const MAX_PAGES = 100;
export const MAX_CONFIG_NAME = 35;

export type ConfigDataType = 'NUMERIC' | 'BOOLEAN' | 'CATEGORICAL';

interface Config {
  id: string;
  name: string;
  dataType: string;
  isArchived: boolean;
  minValue?: number | null;
  maxValue?: number | null;
  categories?: { label: string; value: number }[] | null;
}

function asConfig(row: unknown): Config | undefined {
  if (typeof row !== 'object' || row === null) return undefined;
  const r = row as Record<string, unknown>;
  if (typeof r.id !== 'string' || typeof r.name !== 'string' || typeof r.dataType !== 'string') {
    return undefined;
  }
  return {
    id: r.id,
    name: r.name,
    dataType: r.dataType,
    isArchived: r.isArchived === true,
    minValue: typeof r.minValue === 'number' ? r.minValue : null,
    maxValue: typeof r.maxValue === 'number' ? r.maxValue : null,
    categories: Array.isArray(r.categories)
      ? r.categories.filter(
          (c): c is { label: string; value: number } =>
            typeof c === 'object' &&
            c !== null &&
            typeof (c as { label?: unknown }).label === 'string' &&
            typeof (c as { value?: unknown }).value === 'number',
        )
      : null,
  };
}

function holds(config: Config, dataType: ConfigDataType, value: number | string): boolean {
  if (config.isArchived || config.dataType !== dataType) return false;
  if (dataType !== 'NUMERIC' || typeof value !== 'number') return true;
  return (
    (config.minValue == null || value >= config.minValue) &&
    (config.maxValue == null || value <= config.maxValue)
  );
}

/** The score configs of one Langfuse project, for one write-back batch. */
export class ScoreConfigs {
  private listed: Promise<Config[]> | undefined;

  constructor(
    private readonly rest: LangfuseRest,
    private readonly signal?: AbortSignal,
  ) {}

  /** The id of a config under which `value` (a number, 0/1 for BOOLEAN, or a label) is valid. */
  async idFor(name: string, dataType: ConfigDataType, value: number | string): Promise<string> {
    if (name.length > MAX_CONFIG_NAME) {
      throw LangfuseErrors.LANGFUSE_REQUEST_REFUSED(
        `annotation name of ${name.length} characters: Langfuse score configs, which its annotation scores need, take at most ${MAX_CONFIG_NAME}`,
      );
    }
    const configs = await this.all();
    const found = configs.find((c) => c.name === name && holds(c, dataType, value));
    if (found === undefined) return (await this.create(name, dataType, value)).id;
    if (dataType === 'CATEGORICAL' && typeof value === 'string') {
      await this.withCategory(found, value);
    }
    return found.id;
  }

  private s() {
    return this.signal === undefined ? {} : { signal: this.signal };
  }

  private all(): Promise<Config[]> {
    this.listed ??= this.read();
    // A failed read is not kept: the next item reads again.
    this.listed.catch(() => {
      this.listed = undefined;
    });
    return this.listed;
  }

  private async read(): Promise<Config[]> {
    const out: Config[] = [];
    for (let page = 1; page <= MAX_PAGES; page++) {
      const json = await this.rest.expectOk({
        method: 'GET',
        path: SCORE_CONFIGS_PATH,
        query: { page: String(page), limit: String(PAGE) },
        what: 'GET score-configs',
        ...this.s(),
      });
      const data = Array.isArray(json.data) ? json.data : [];
      for (const row of data) {
        const c = asConfig(row);
        if (c !== undefined) out.push(c);
      }
      const meta = json.meta as { totalPages?: unknown } | undefined;
      const pages = typeof meta?.totalPages === 'number' ? meta.totalPages : page;
      if (data.length < PAGE || page >= pages) break;
    }
    return out;
  }

  private async create(
    name: string,
    dataType: ConfigDataType,
    value: number | string,
  ): Promise<Config> {
    const body: Record<string, unknown> = { name, dataType };
    if (dataType === 'NUMERIC') Object.assign(body, { minValue: 0, maxValue: 1 });
    if (dataType === 'CATEGORICAL') body.categories = [{ label: String(value), value: 0 }];
    const json = await this.rest.expectOk({
      method: 'POST',
      path: SCORE_CONFIGS_PATH,
      body,
      what: 'POST score-configs',
      ...this.s(),
    });
    const created = asConfig(json);
    if (created === undefined) {
      throw this.rest.failure(
        { status: 200, mediaType: 'application/json', json },
        'POST score-configs',
      );
    }
    (await this.all()).push(created);
    return created;
  }

  private async withCategory(config: Config, label: string): Promise<void> {
    const categories = config.categories ?? [];
    if (categories.some((c) => c.label === label)) return;
    const next = categories.reduce((max, c) => Math.max(max, c.value), -1) + 1;
    const updated = [...categories, { label, value: next }];
    await this.rest.expectOk({
      method: 'PATCH',
      path: `${SCORE_CONFIGS_PATH}/${encodeURIComponent(config.id)}`,
      body: { categories: updated },
      what: 'PATCH score-configs',
      ...this.s(),
    });
    config.categories = updated;
  }
}
