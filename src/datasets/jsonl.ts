import { DatasetErrors } from './error-codes.js';
import type { RowLocation } from './rows.js';

/** One line of a JSON Lines file: its parsed value, or why it has none. */
export type JsonlRow = { at: RowLocation; value: unknown } | { at: RowLocation; problem: string };

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The rows of a JSON Lines file, line by line. Blank lines are skipped (a trailing newline is
 * common); a UTF-8 byte order mark and CR line ends are accepted. A line longer than
 * `maxRowBytes` throws DATASET_ROW_TOO_LARGE at once. Parse failures are problems of the row,
 * said without quoting it (V8's JSON messages can echo a slice of the line).
 */
export function* jsonlRows(body: Uint8Array, maxRowBytes: number): Generator<JsonlRow> {
  let pos = body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf ? 3 : 0;
  let line = 0;
  while (pos < body.length) {
    line++;
    let end = body.indexOf(0x0a, pos);
    if (end < 0) end = body.length;
    const next = end + 1;
    if (end > pos && body[end - 1] === 0x0d) end--;
    if (end - pos > maxRowBytes) {
      throw DatasetErrors.DATASET_ROW_TOO_LARGE(
        `line ${line} is longer than ${maxRowBytes} bytes; the limit per JSON Lines row is 4 MiB`,
        { details: [{ path: `lines[${line}]`, message: `longer than ${maxRowBytes} bytes` }] },
      );
    }
    const at = { label: `line ${line}`, path: `lines[${line}]` };
    const bytes = body.subarray(pos, end);
    pos = next;
    let text: string;
    try {
      text = utf8.decode(bytes);
    } catch {
      yield { at, problem: 'not valid UTF-8' };
      continue;
    }
    if (text.trim() === '') continue;
    try {
      yield { at, value: JSON.parse(text) };
    } catch {
      yield { at, problem: 'not valid JSON' };
    }
  }
}
