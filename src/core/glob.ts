/**
 * Glob matching for names written in config (redaction key rules, credential grant projects):
 * `*` matches any run of characters (dots too), `?` one character, everything else itself.
 * Iterative, remembering only the last `*`: O(n·m) at worst for a text of n and a glob of m
 * characters, never the exponential backtracking of a glob translated into a regular expression.
 */
export function globMatch(glob: string, text: string): boolean {
  let g = 0;
  let t = 0;
  let star = -1;
  let resume = 0;
  while (t < text.length) {
    const gc = glob.charCodeAt(g);
    if (g < glob.length && (gc === 0x3f || gc === text.charCodeAt(t))) {
      g++;
      t++;
    } else if (g < glob.length && gc === 0x2a) {
      star = g++;
      resume = t;
    } else if (star >= 0) {
      g = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (g < glob.length && glob.charCodeAt(g) === 0x2a) g++;
  return g === glob.length;
}
