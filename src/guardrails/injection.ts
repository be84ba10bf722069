import RE2 from 're2';

/**
 * Prompt-injection heuristics: phrases that ask a model to drop its instructions, reveal its
 * system prompt, switch to an unrestricted persona, or that smuggle chat-template tokens. Each
 * phrase found adds its weight once; a text whose sum reaches the check's threshold is a hit.
 * A screen for the common attacks, not a classifier: the judge check is the deeper look.
 */
const PHRASES: readonly { pattern: string; weight: number }[] = [
  {
    pattern:
      '\\b(?:ignore|disregard|forget|override|bypass)\\s+(?:all\\s+|any\\s+|the\\s+|your\\s+|of\\s+)*(?:previous|prior|above|earlier|preceding|system|original)\\s+(?:instructions?|prompts?|rules|directions|guidelines|messages?)',
    weight: 1,
  },
  {
    pattern:
      '\\b(?:reveal|show|print|repeat|output|leak|tell\\s+me)\\s+(?:me\\s+)?(?:your|the)\\s+(?:full\\s+|exact\\s+|entire\\s+)?(?:system|hidden|initial|original|secret)\\s+(?:prompt|instructions|message)',
    weight: 1,
  },
  {
    pattern:
      '\\byou\\s+are\\s+(?:now\\s+)?(?:in\\s+)?(?:DAN|developer\\s+mode|jailbroken|unrestricted|unfiltered|uncensored)',
    weight: 1,
  },
  { pattern: '\\b(?:do\\s+anything\\s+now|DAN\\s+mode|developer\\s+mode\\s+enabled)', weight: 1 },
  { pattern: '<\\|im_start\\|>|<\\|system\\|>|\\[/?INST\\]|<<SYS>>', weight: 1 },
  {
    pattern:
      '\\b(?:act|behave|respond)\\s+as\\s+(?:an?\\s+)?(?:unfiltered|uncensored|unrestricted|evil)',
    weight: 1,
  },
  {
    pattern:
      '\\bwithout\\s+(?:any\\s+)?(?:restrictions|filters|safety\\s+guidelines|content\\s+polic(?:y|ies))',
    weight: 0.5,
  },
  { pattern: '\\bjailbreak', weight: 0.5 },
  { pattern: '\\bnew\\s+(?:system\\s+)?instructions\\s*:', weight: 0.5 },
  { pattern: '\\bpretend\\s+(?:that\\s+)?(?:you\\s+are|to\\s+be)\\b', weight: 0.5 },
];

const COMPILED = PHRASES.map(({ pattern, weight }) => ({ re: new RE2(pattern, 'giu'), weight }));

/** The injection score of `text` and the ranges (start, end pairs) of the phrases found. */
export function injectionScore(text: string): { score: number; ranges: number[] } {
  let score = 0;
  const ranges: number[] = [];
  for (const { re, weight } of COMPILED) {
    re.lastIndex = 0;
    let found = false;
    for (let m = re.exec(text); m !== null; m = re.exec(text)) {
      if (m[0].length === 0) {
        re.lastIndex = m.index + 1;
        continue;
      }
      found = true;
      ranges.push(m.index, m.index + m[0].length);
    }
    if (found) score += weight;
  }
  return { score, ranges };
}
