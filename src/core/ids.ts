import { randomBytes, randomUUID } from 'node:crypto';

/** A random id with a type prefix, e.g. `key_3f9c…`; 96 bits of entropy. */
export function newId(prefix: string): string {
  return `${prefix}_${randomBytes(12).toString('hex')}`;
}

export function newRequestId(): string {
  return randomUUID();
}

/** A random opaque secret with a prefix, e.g. `tsk_…`; 256 bits, base64url. */
export function newSecret(prefix: string): string {
  return `${prefix}_${randomBytes(32).toString('base64url')}`;
}
