/**
 * Conventions: the spans of one trace → the Record (input, output, trajectory, usage, labels,
 * metadata) and the trace summary. One reader per tracing convention (OTel GenAI current and
 * legacy, OpenInference, MLflow, Langfuse, OpenLLMetry, Vercel AI SDK, Pydantic AI / Logfire),
 * registered in `readers.ts`; field precedence across conventions in `precedence.ts`; rules across
 * spans in `trajectory.ts`. Pure functions over `core` types: no I/O, no other area imported.
 * Documented for users in docs/conventions.md.
 */
export { type NormalizeOptions, normalizeTrace } from './normalize.js';
export type { ConventionReader } from './reader.js';
export { READERS } from './readers.js';
