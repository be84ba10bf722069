/**
 * Trace and dataset content is shown as text, never parsed as HTML: Preact puts strings into text
 * nodes, and the page's Trusted Types policy refuses every HTML sink besides. Values the server
 * redacted (`[REDACTED]`) are marked so nobody mistakes them for what the agent saw.
 */

const REDACTED = '[REDACTED]';

export function Text({ value, clamp }: { value: string; clamp?: number }) {
  const shown = clamp !== undefined && value.length > clamp ? `${value.slice(0, clamp)}…` : value;
  if (!shown.includes(REDACTED)) return <>{shown}</>;
  const parts = shown.split(REDACTED);
  return (
    <>
      {parts.map((part, i) => (
        <span key={i}>
          {part}
          {i < parts.length - 1 && (
            <mark class="redacted" title="Redacted by the server before it was stored">
              {REDACTED}
            </mark>
          )}
        </span>
      ))}
    </>
  );
}
