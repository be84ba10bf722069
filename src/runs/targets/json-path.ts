/**
 * The small JSON path subset an HTTP target's `outputPath` takes: `$`, then any number of `.name`,
 * `['name']` / `["name"]` and `[index]` steps, e.g. `$.choices[0].message.content`. Filters,
 * wildcards and recursive descent are left out on purpose: one path must name one value.
 */

export type PathSegment = string | number;

/** The segments of `path`, or a message saying what is wrong with it. */
export function parseJsonPath(path: string): PathSegment[] | string {
  if (!path.startsWith('$')) return 'must start with $';
  const segments: PathSegment[] = [];
  let i = 1;
  while (i < path.length) {
    const c = path[i];
    if (c === '.') {
      const m = /^[A-Za-z_$][A-Za-z0-9_$-]*/.exec(path.slice(i + 1));
      if (m === null) return `expected a field name after "." at position ${i + 1}`;
      segments.push(m[0]);
      i += 1 + m[0].length;
    } else if (c === '[') {
      const rest = path.slice(i);
      const index = /^\[(\d{1,9})\]/.exec(rest);
      // The two alternatives never both match a character (a backslash always starts an
      // escape), so a path that does not close cannot backtrack exponentially.
      const quoted = /^\[(['"])((?:\\.|(?!\1|\\).)*)\1\]/.exec(rest);
      if (index !== null) {
        segments.push(Number(index[1]));
        i += index[0].length;
      } else if (quoted !== null) {
        segments.push((quoted[2] as string).replace(/\\(.)/g, '$1'));
        i += quoted[0].length;
      } else {
        return `expected [index] or ['name'] at position ${i}`;
      }
    } else {
      return `unexpected character at position ${i}; use .name, ['name'] or [index]`;
    }
  }
  return segments;
}

/** The value at `segments`, or `found: false` when a step is missing or of the wrong type. */
export function readJsonPath(
  value: unknown,
  segments: readonly PathSegment[],
): { found: true; value: unknown } | { found: false; at: number } {
  let current = value;
  for (const [i, seg] of segments.entries()) {
    if (typeof seg === 'number') {
      if (!Array.isArray(current) || seg >= current.length) return { found: false, at: i };
      current = current[seg];
    } else {
      if (
        current === null ||
        typeof current !== 'object' ||
        Array.isArray(current) ||
        !Object.hasOwn(current, seg)
      ) {
        return { found: false, at: i };
      }
      current = (current as Record<string, unknown>)[seg];
    }
  }
  return { found: true, value: current };
}

/** `$.a[0]`-style rendering of the first `n` segments, for error messages. */
export function formatJsonPath(segments: readonly PathSegment[], n = segments.length): string {
  let out = '$';
  for (const seg of segments.slice(0, n)) {
    out +=
      typeof seg === 'number'
        ? `[${seg}]`
        : /^[A-Za-z_$][A-Za-z0-9_$-]*$/.test(seg)
          ? `.${seg}`
          : `[${JSON.stringify(seg)}]`;
  }
  return out;
}
