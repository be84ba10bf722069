/** Storage port: API keys as stored (never their secrets). The conventions are in ../ports.ts. */

import type { Role } from '../../core/index.js';
import type { Page, PageRequest } from './paging.js';

export type { Role };

/** An API key as stored, without its secret. */
export interface ApiKeyRecord {
  /** `key_…` */
  id: string;
  project: string;
  name: string;
  roles: Role[];
  labels: Record<string, string>;
  /** The first characters of the secret, for display (`tsk_AbCd`). */
  prefix: string;
  createdAt: string;
  lastUsedAt?: string;
  revokedAt?: string;
  expiresAt?: string;
  /** Narrows what the key reads: only these services and/or traces carrying these labels. */
  scope?: KeyScope;
}

export interface KeyScope {
  services?: string[];
  labels?: Record<string, string>;
}

export interface NewApiKey extends ApiKeyRecord {
  /** Hash of the secret (the secret itself is never stored). Unique across all keys. */
  secretHash: string;
}

export interface ApiKeyStore {
  /** Stores a new key. Throws ALREADY_EXISTS when the id or the secret hash is taken. */
  create(key: NewApiKey): Promise<ApiKeyRecord>;
  /** The key with this secret hash, revoked and expired ones included (the caller refuses them). */
  getBySecretHash(secretHash: string): Promise<ApiKeyRecord | undefined>;
  get(id: string): Promise<ApiKeyRecord | undefined>;
  /**
   * Keys of one project (all projects when `project` is undefined), oldest first, revoked ones
   * included. Throws INVALID_ARGUMENT for a malformed page token.
   */
  list(project: string | undefined, page: PageRequest): Promise<Page<ApiKeyRecord>>;
  /**
   * Marks the key revoked at `at`. Returns false when no key has this id. Revoking twice keeps
   * the first revocation time and returns true.
   */
  revoke(id: string, at: string): Promise<boolean>;
  /**
   * Records a use at `at`. Only moves `lastUsedAt` forward and does nothing for unknown ids; one
   * small UPDATE, so callers may coalesce calls (auth writes at most once a minute per key).
   */
  touch(id: string, at: string): Promise<void>;
}
