/**
 * @module guardrails
 * Gateway guardrails: the Envoy external processor (ext_proc v3 over gRPC) that guards MCP
 * traffic. Imports domain areas through their index; never the composition root.
 */
export {};
