/**
 * `s` without its trailing slashes. A loop: the regex `/\/+$/` rescans a run of slashes from each
 * of its positions, quadratic on a URL or path a caller sends with thousands of them.
 */
export function withoutTrailingSlashes(s: string): string {
  let end = s.length;
  while (end > 0 && s.charCodeAt(end - 1) === 0x2f) end--;
  return s.slice(0, end);
}
