import type { Message } from './record.js';

/**
 * Content helpers: a record's input/output/reference may be text, chat messages or any JSON.
 * Evaluators compare text, so these turn any of them into the text a person would read.
 */

export function isMessage(v: unknown): v is Message {
  return typeof v === 'object' && v !== null && typeof (v as { role?: unknown }).role === 'string';
}

function isTextPart(p: unknown): boolean {
  return typeof p === 'object' && p !== null && 'text' in p;
}

/**
 * True for content that reads as text: a string, a chat message or transcript, or content parts
 * (`[{type: 'text', text}]`). Any other value is structured JSON.
 */
export function isTextContent(value: unknown): boolean {
  if (typeof value === 'string' || isMessage(value)) return true;
  if (!Array.isArray(value) || value.length === 0) return false;
  return value.every(isMessage) || value.every(isTextPart);
}

/** The text of a value: strings as is, messages by their content, other JSON serialized. */
export function contentText(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (Array.isArray(value) && value.length > 0 && value.every(isMessage)) {
    return value.map((m) => contentText(m.content)).join('\n');
  }
  if (isMessage(value)) return contentText(value.content);
  if (
    Array.isArray(value) &&
    value.every((p) => typeof p === 'object' && p !== null && 'text' in p)
  ) {
    // Content parts such as [{type: 'text', text: '…'}].
    return value.map((p) => String((p as { text: unknown }).text)).join('');
  }
  return JSON.stringify(value);
}

/** The answer text of an output: for a chat transcript, the last assistant message. */
export function outputText(value: unknown): string {
  if (Array.isArray(value) && value.length > 0 && value.every(isMessage)) {
    const last =
      [...value].reverse().find((m) => m.role === 'assistant') ?? value[value.length - 1];
    return contentText(last?.content);
  }
  return contentText(value);
}

/** A value is present when it is not absent, null, or an empty string/list. */
export function isPresent(value: unknown): boolean {
  if (value === undefined || value === null) return false;
  if (typeof value === 'string') return value.length > 0;
  if (Array.isArray(value)) return value.length > 0;
  return true;
}

/** The candidates of a reference: a JSON list means "any of these". */
export function referenceCandidates(reference: unknown): unknown[] {
  if (Array.isArray(reference) && !reference.every(isMessage)) return reference;
  return [reference];
}
