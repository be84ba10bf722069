import type { Kysely, Selectable } from 'kysely';
import { CoreErrors, isTouchstoneError } from '../core/index.js';
import { toIso, toMillis, toMillisOrNull } from './columns.js';
import { decodePageToken, encodePageToken, pageLimit } from './page-token.js';
import type {
  ApiKeyRecord,
  ApiKeyStore,
  KeyScope,
  NewApiKey,
  Page,
  PageRequest,
  Role,
} from './ports.js';
import type { ApiKeysTable, Database } from './schema.js';

const COLUMNS = [
  'id',
  'project',
  'name',
  'roles',
  'labels',
  'prefix',
  'created_at',
  'last_used_at',
  'revoked_at',
  'expires_at',
  'scope',
] as const;

type Row = Pick<Selectable<ApiKeysTable>, (typeof COLUMNS)[number]>;

function fromRow(row: Row): ApiKeyRecord {
  const record: ApiKeyRecord = {
    id: row.id,
    project: row.project,
    name: row.name,
    roles: JSON.parse(row.roles) as Role[],
    labels: JSON.parse(row.labels) as Record<string, string>,
    prefix: row.prefix,
    createdAt: toIso(row.created_at),
  };
  if (row.last_used_at !== null) record.lastUsedAt = toIso(row.last_used_at);
  if (row.revoked_at !== null) record.revokedAt = toIso(row.revoked_at);
  if (row.expires_at !== null) record.expiresAt = toIso(row.expires_at);
  if (row.scope !== null) record.scope = JSON.parse(row.scope) as KeyScope;
  return record;
}

export class KyselyApiKeyStore implements ApiKeyStore {
  constructor(private readonly db: Kysely<Database>) {}

  async create(key: NewApiKey): Promise<ApiKeyRecord> {
    const row: ApiKeysTable = {
      id: key.id,
      project: key.project,
      name: key.name,
      roles: JSON.stringify(key.roles),
      labels: JSON.stringify(key.labels),
      prefix: key.prefix,
      secret_hash: key.secretHash,
      created_at: toMillis(key.createdAt, 'createdAt'),
      last_used_at: toMillisOrNull(key.lastUsedAt, 'lastUsedAt'),
      revoked_at: toMillisOrNull(key.revokedAt, 'revokedAt'),
      expires_at: toMillisOrNull(key.expiresAt, 'expiresAt'),
      scope: key.scope === undefined ? null : JSON.stringify(key.scope),
    };
    try {
      await this.db.insertInto('api_keys').values(row).execute();
    } catch (err) {
      if (isTouchstoneError(err) && err.code === CoreErrors.ALREADY_EXISTS.code) {
        throw CoreErrors.ALREADY_EXISTS('an API key with this id or secret already exists');
      }
      throw err;
    }
    return fromRow(row);
  }

  async getBySecretHash(secretHash: string): Promise<ApiKeyRecord | undefined> {
    const row = await this.db
      .selectFrom('api_keys')
      .select(COLUMNS)
      .where('secret_hash', '=', secretHash)
      .executeTakeFirst();
    return row === undefined ? undefined : fromRow(row);
  }

  async get(id: string): Promise<ApiKeyRecord | undefined> {
    const row = await this.db
      .selectFrom('api_keys')
      .select(COLUMNS)
      .where('id', '=', id)
      .executeTakeFirst();
    return row === undefined ? undefined : fromRow(row);
  }

  async list(project: string | undefined, page: PageRequest): Promise<Page<ApiKeyRecord>> {
    const limit = pageLimit(page);
    const after = decodePageToken(page.pageToken);
    let query = this.db
      .selectFrom('api_keys')
      .select(COLUMNS)
      .orderBy('created_at')
      .orderBy('id')
      .limit(limit + 1);
    if (project !== undefined) query = query.where('project', '=', project);
    if (after !== undefined) {
      query = query.where((eb) =>
        eb(eb.refTuple('created_at', 'id'), '>', eb.tuple(after.at, after.id)),
      );
    }
    const rows = await query.execute();
    const items = rows.slice(0, limit);
    const last = items.at(-1);
    if (rows.length <= limit || last === undefined) return { items: items.map(fromRow) };
    return {
      items: items.map(fromRow),
      nextPageToken: encodePageToken({ at: last.created_at, id: last.id }),
    };
  }

  async revoke(id: string, at: string): Promise<boolean> {
    const ms = toMillis(at, 'at');
    const result = await this.db
      .updateTable('api_keys')
      .set((eb) => ({ revoked_at: eb.fn.coalesce('revoked_at', eb.val(ms)) }))
      .where('id', '=', id)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }

  async touch(id: string, at: string): Promise<void> {
    const ms = toMillis(at, 'at');
    await this.db
      .updateTable('api_keys')
      .set({ last_used_at: ms })
      .where('id', '=', id)
      .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<', ms)]))
      .execute();
  }
}
