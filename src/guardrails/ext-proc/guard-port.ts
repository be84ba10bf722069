import type { GuardEngine } from '../engine.js';

/**
 * The guard engine's surface the external processor calls: the decision of a named guard policy
 * for a principal. The engine never throws; the processor still bounds the wait.
 */
export type Guard = Pick<GuardEngine, 'decide'>;
