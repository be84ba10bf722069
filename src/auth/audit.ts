import { CoreErrors, isTouchstoneError } from '../core/index.js';
import { DEFAULT_PROJECT, type Principal } from './principal.js';

/** The slice of a pino logger audit lines go to. */
export interface AuditLogger {
  info(obj: object, msg: string): void;
}

/**
 * Runs a write operation and logs one audit line for it: principal, action, project and the
 * resource's identity (`target`, e.g. `{webhook: name}`), with the outcome and the error code
 * when refused. Never the payload: callers pass names, not secrets or URLs.
 */
export async function audited<T>(
  logger: AuditLogger,
  caller: Principal,
  action: string,
  project: string | undefined,
  target: Record<string, string>,
  fn: () => Promise<T>,
): Promise<T> {
  const line = {
    audit: {
      principal: caller.id,
      action,
      project: project ?? caller.project ?? DEFAULT_PROJECT,
      ...target,
    },
  };
  try {
    const out = await fn();
    logger.info({ ...line, outcome: 'ok' }, 'audit');
    return out;
  } catch (err) {
    const code = isTouchstoneError(err) ? err.code : CoreErrors.INTERNAL.code;
    logger.info({ ...line, outcome: 'refused', code }, 'audit');
    throw err;
  }
}
