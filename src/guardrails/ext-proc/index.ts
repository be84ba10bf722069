export type { Guard } from './guard-port.js';
export { type ExtProcSettings, processStream, type StreamCaller } from './processor.js';
export {
  createExtProcServer,
  type ExtProcServer,
  type ExtProcServerDeps,
  POLICY_METADATA,
  PROJECT_METADATA,
} from './server.js';
