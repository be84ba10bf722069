import { z } from 'zod';
import {
  contentText,
  type EvalRecord,
  isPresent,
  outputText,
  referenceCandidates,
  type Score,
} from '../../core/index.js';
import { defineEvaluator, type JudgeRequest } from '../contract.js';
import { clip, type DataBlock, dataRules, fenceData } from './fence.js';
import { askJudge, explanation, judgeMetadata, normalizeScore } from './verdict.js';

/** Bump when any prompt text below changes: it is part of the judge cache key. */
export const LLM_JUDGE_PROMPT_VERSION = 'llm-judge/1';

/** Longest text of one data block; protects the judge's context window. */
const MAX_BLOCK_CHARS = 24_000;

const BUILT_IN_RUBRICS = {
  correctness: [
    'Criterion: correctness. Does the response give the same answer as the reference?',
    'Judge factual agreement with the reference answer (any one of several references counts), not style, length or wording.',
    '5 = fully correct and consistent with the reference; 4 = correct with a minor omission or imprecision;',
    '3 = partly correct; 2 = mostly incorrect; 1 = incorrect, contradicts the reference, or does not answer.',
  ].join(' '),
  helpfulness: [
    'Criterion: helpfulness. How well does the response help the user accomplish what the input asks for?',
    'Consider whether it addresses the actual need, is accurate, complete enough to act on, and clear.',
    '5 = fully meets the need; 4 = helpful with small gaps; 3 = somewhat helpful; 2 = barely helpful; 1 = unhelpful, wrong or a refusal without reason.',
  ].join(' '),
  relevance: [
    "Criterion: relevance. Does the response address the user's input and stay on topic?",
    'Do not judge correctness, only whether the content is pertinent to what was asked.',
    '5 = entirely relevant; 4 = relevant with minor digressions; 3 = partly relevant; 2 = mostly off topic; 1 = unrelated to the input.',
  ].join(' '),
  faithfulness: [
    'Criterion: faithfulness. Is every claim in the response supported by the provided context?',
    'Claims not stated in or directly inferable from the context count as unsupported, even if true in general.',
    '5 = every claim supported; 4 = one minor unsupported detail; 3 = some unsupported claims; 2 = mostly unsupported; 1 = contradicts the context or is unsupported throughout.',
  ].join(' '),
} as const;

type BuiltInRubric = keyof typeof BUILT_IN_RUBRICS;

function builtInRubric(rubric: string): BuiltInRubric | undefined {
  const key = rubric.trim().toLowerCase();
  return Object.hasOwn(BUILT_IN_RUBRICS, key) ? (key as BuiltInRubric) : undefined;
}

const LlmJudgeParamsSchema = z.strictObject({
  /** A built-in rubric name (correctness, helpfulness, relevance, faithfulness) or custom criteria. */
  rubric: z.string().trim().min(1).max(8000),
  /** When set, also reports `passed` = normalized score ≥ this. */
  passThreshold: z.number().min(0).max(1).optional(),
});

const VerdictSchema = z.object({
  reasoning: z.string(),
  score: z.number().min(1).max(5),
});

function numbered(items: readonly unknown[], render: (v: unknown) => string): string {
  if (items.length === 1) return render(items[0]);
  return items.map((v, i) => `[${i + 1}] ${render(v)}`).join('\n');
}

/** Builds the judge request; exported for tests that check the fencing. */
export function buildLlmJudgeRequest(rubric: string, record: EvalRecord): JudgeRequest {
  const builtIn = builtInRubric(rubric);
  const blocks: DataBlock[] = [
    { name: 'input', text: clip(contentText(record.input), MAX_BLOCK_CHARS) },
    { name: 'output', text: clip(outputText(record.output), MAX_BLOCK_CHARS) },
  ];
  const wantsReference =
    builtIn === 'correctness' || (builtIn === undefined && isPresent(record.reference));
  const wantsContext =
    builtIn === 'faithfulness' || (builtIn === undefined && isPresent(record.context));
  if (wantsReference) {
    const refs = referenceCandidates(record.reference);
    blocks.push({ name: 'reference', text: clip(numbered(refs, outputText), MAX_BLOCK_CHARS) });
  }
  if (wantsContext) {
    blocks.push({
      name: 'context',
      text: clip(numbered(record.context ?? [], contentText), MAX_BLOCK_CHARS),
    });
  }
  const fenced = fenceData(blocks);
  const criteria =
    builtIn !== undefined
      ? BUILT_IN_RUBRICS[builtIn]
      : `Criterion (set by the evaluator's configuration): ${rubric.trim()}\nRate how well the response meets it: 5 = fully, 3 = partly, 1 = not at all.`;
  const parts = [
    'data-input holds the user input',
    'data-output holds the response to evaluate',
    wantsReference ? 'data-reference holds the reference answer(s)' : undefined,
    wantsContext ? 'data-context holds the context the response should rely on' : undefined,
  ].filter((p): p is string => p !== undefined);
  const system = [
    'You are an impartial evaluator of AI assistant responses.',
    criteria,
    `${dataRules(fenced.nonce)} In this prompt, ${parts.join('; ')}.`,
    'Answer with one JSON object and nothing else: {"reasoning": "<brief justification>", "score": <integer 1 to 5>}.',
  ].join('\n\n');
  const user = `${fenced.text}\n\nEvaluate the response in data-output by the criterion. Answer with the JSON object only.`;
  return {
    messages: [
      { role: 'system', content: system },
      { role: 'user', content: user },
    ],
    promptVersion: LLM_JUDGE_PROMPT_VERSION,
    json: true,
    temperature: 0,
    maxTokens: 1024,
  };
}

export const llmJudgeEvaluator = defineEvaluator({
  manifest: {
    type: 'llm-judge',
    description:
      'A judge model rates the output 1-5 by a rubric (correctness, helpfulness, relevance, faithfulness, or custom text), normalized to 0-1.',
    needs: ['input', 'output', 'judge'],
    scores: [
      { name: 'llm-judge', kind: 'number', range: [0, 1], higherIsBetter: true },
      { name: 'passed', kind: 'passed' },
    ],
    params: LlmJudgeParamsSchema,
    cheap: false,
  },
  bind(params) {
    const builtIn = builtInRubric(params.rubric);
    return {
      async evaluate(record, ctx) {
        if (builtIn === 'correctness' && !isPresent(record.reference)) {
          return { skip: 'record has no reference' };
        }
        if (builtIn === 'faithfulness' && !isPresent(record.context)) {
          return { skip: 'record has no context' };
        }
        if (ctx.judge === undefined) return { skip: 'no judge is configured' };
        const request = buildLlmJudgeRequest(params.rubric, record);
        const { verdict, response } = await askJudge(ctx.judge, request, VerdictSchema, ctx.signal);
        const value = normalizeScore(verdict.score);
        const scores: Score[] = [
          {
            name: 'llm-judge',
            value,
            explanation: explanation(verdict.reasoning),
            metadata: judgeMetadata(response, request.promptVersion, verdict.score),
          },
        ];
        if (params.passThreshold !== undefined) {
          scores.push({ name: 'passed', passed: value >= params.passThreshold });
        }
        return { scores };
      },
    };
  },
});
