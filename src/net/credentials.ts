/** Names the environment variable that holds a secret; the secret itself never sits in config. */
export interface CredentialRef {
  env: string;
}

/**
 * Looks a credential up in the environment handed in by the composition root (only `main.ts`
 * reads `process.env`). Resolved per use, so a rotated secret takes effect without a rebuild.
 * Surrounding whitespace is dropped (secrets pasted from files often end in a newline); an unset
 * or blank variable is `undefined`, so callers can refuse instead of sending an empty token.
 */
export function resolveCredential(
  ref: CredentialRef,
  env: Readonly<Record<string, string | undefined>>,
): string | undefined {
  if (!Object.hasOwn(env, ref.env)) return undefined;
  const value = env[ref.env]?.trim();
  return value === undefined || value === '' ? undefined : value;
}
