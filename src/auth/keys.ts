import { createHash } from 'node:crypto';
import { z } from 'zod';
import { type Clock, CoreErrors, newId, newSecret } from '../core/index.js';
import type { ApiKeyRecord, ApiKeyStore } from '../store/index.js';
import { AuthErrors } from './error-codes.js';
import { authorize, keyPrincipal, type Principal } from './principal.js';
import { ROLES } from './roles.js';

/**
 * API keys: created per project with roles; the secret (`tsk_…`) is shown once and stored only
 * as a SHA-256 hash (secrets are 256-bit random, so a slow hash adds nothing).
 */

export const SECRET_PREFIX = 'tsk';

const labelKey = z
  .string()
  .regex(/^[A-Za-z0-9_.\-/]{1,128}$/, 'label keys are 1–128 of A-Z a-z 0-9 _ . - /');

export const CreateKeySchema = z.strictObject({
  project: z
    .string()
    .regex(/^[a-z0-9][a-z0-9_.-]{0,62}$/, 'project names are lowercase letters, digits, _ . -')
    .optional(),
  name: z.string().min(1).max(128).optional(),
  roles: z.array(z.enum(ROLES)).min(1),
  labels: z.record(labelKey, z.string().max(256)).optional(),
  expiresAt: z.iso.datetime({ offset: true }).optional(),
  /** Narrows what the key reads (traces, scores): only these services and/or labels. */
  scope: z
    .strictObject({
      services: z.array(z.string().min(1)).min(1).optional(),
      labels: z.record(labelKey, z.string().max(256)).optional(),
    })
    .optional(),
});
export type CreateKeyRequest = z.infer<typeof CreateKeySchema>;

/** A key as the API shows it: never the secret or its hash. */
export type ApiKey = ApiKeyRecord;

export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

export interface KeyServiceDeps {
  keys: ApiKeyStore;
  clock: Clock;
}

/** How long a verified key is trusted from memory before the store is asked again. */
const CACHE_MS = 5_000;
/** Last-used times are written at most this often per key. */
const TOUCH_EVERY_MS = 60_000;

export class KeyService {
  private readonly cache = new Map<string, { record: ApiKeyRecord; until: number }>();
  private readonly touched = new Map<string, number>();

  constructor(private readonly deps: KeyServiceDeps) {}

  async create(
    caller: Principal,
    request: CreateKeyRequest,
  ): Promise<{ key: ApiKey; secret: string }> {
    const project = authorize(caller, 'keys.write', request.project);
    if (request.roles.includes('owner') && !caller.roles.includes('owner')) {
      throw AuthErrors.KEY_ROLE_NOT_ALLOWED('only an owner may create a key with the owner role');
    }
    // A key that could never authenticate is a mistake (a typo in the year), not a request.
    if (request.expiresAt !== undefined && Date.parse(request.expiresAt) <= this.deps.clock.now()) {
      throw CoreErrors.INVALID_ARGUMENT('expiresAt is not in the future', {
        details: [{ path: 'expiresAt', message: 'must be a time after now' }],
      });
    }
    const secret = newSecret(SECRET_PREFIX);
    const record: ApiKeyRecord = {
      id: newId('key'),
      project,
      name: request.name ?? '',
      roles: [...new Set(request.roles)],
      labels: request.labels ?? {},
      prefix: secret.slice(0, SECRET_PREFIX.length + 5),
      createdAt: new Date(this.deps.clock.now()).toISOString(),
      ...(request.expiresAt === undefined
        ? {}
        : { expiresAt: new Date(request.expiresAt).toISOString() }),
      ...(request.scope === undefined ? {} : { scope: request.scope }),
    };
    await this.deps.keys.create({ ...record, secretHash: hashSecret(secret) });
    return { key: record, secret };
  }

  async list(
    caller: Principal,
    project: string | undefined,
    page: { pageSize: number; pageToken?: string },
  ): Promise<{ items: ApiKey[]; nextPageToken?: string }> {
    // A key lists its own project (naming another is refused); the open principal lists the one
    // named, or every project.
    const scope = authorize(caller, 'keys.read', project);
    return this.deps.keys.list(caller.project === undefined ? project : scope, page);
  }

  async revoke(caller: Principal, id: string): Promise<ApiKey> {
    authorize(caller, 'keys.write', caller.project);
    const key = await this.deps.keys.get(id);
    if (key === undefined || (caller.project !== undefined && key.project !== caller.project)) {
      throw AuthErrors.KEY_NOT_FOUND(`no key ${id}`);
    }
    authorize(caller, 'keys.write', key.project);
    if (key.roles.includes('owner') && !caller.roles.includes('owner')) {
      throw AuthErrors.KEY_ROLE_NOT_ALLOWED('only an owner may revoke a key with the owner role');
    }
    const at = new Date(this.deps.clock.now()).toISOString();
    await this.deps.keys.revoke(id, at);
    for (const [hash, entry] of this.cache) if (entry.record.id === id) this.cache.delete(hash);
    return { ...key, revokedAt: key.revokedAt ?? at };
  }

  /** Resolves a bearer secret to a principal, or throws UNAUTHENTICATED. */
  async authenticate(secret: string): Promise<Principal> {
    const now = this.deps.clock.now();
    const hash = hashSecret(secret);
    let record = this.cache.get(hash);
    if (record === undefined || record.until < now) {
      const found = await this.deps.keys.getBySecretHash(hash);
      if (found === undefined) throw AuthErrors.UNAUTHENTICATED('unknown API key');
      record = { record: found, until: now + CACHE_MS };
      this.cache.set(hash, record);
      if (this.cache.size > 10_000) this.cache.delete(this.cache.keys().next().value as string);
    }
    const key = record.record;
    if (key.revokedAt !== undefined) throw AuthErrors.UNAUTHENTICATED('this API key was revoked');
    if (key.expiresAt !== undefined && Date.parse(key.expiresAt) <= now) {
      throw AuthErrors.UNAUTHENTICATED('this API key has expired');
    }
    const last = this.touched.get(key.id) ?? 0;
    if (now - last >= TOUCH_EVERY_MS) {
      this.touched.set(key.id, now);
      await this.deps.keys.touch(key.id, new Date(now).toISOString());
    }
    return keyPrincipal(key);
  }
}
