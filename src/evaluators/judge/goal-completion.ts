import { z } from 'zod';
import {
  contentText,
  type EvalRecord,
  isPresent,
  outputText,
  type Step,
} from '../../core/index.js';
import { defineEvaluator, type JudgeRequest } from '../contract.js';
import { clip, dataRules, fenceData, truncate } from './fence.js';
import { askJudge, explanation, judgeMetadata, normalizeScore } from './verdict.js';

/** Bump when any prompt text below changes: it is part of the judge cache key. */
export const GOAL_COMPLETION_PROMPT_VERSION = 'goal-completion/1';

/** Per step, the input and the output are each cut to this many characters. */
export const STEP_FIELD_CHARS = 500;
/** The whole transcript; beyond it the middle steps are dropped. */
export const TRANSCRIPT_CHARS = 12_000;
/** Share of the transcript budget kept from the start; the rest goes to the end. */
const HEAD_SHARE = 0.3;
const MAX_GOAL_CHARS = 8_000;
const MAX_ANSWER_CHARS = 8_000;

interface MessageLike {
  role: string;
  content?: unknown;
  toolCalls?: { name: string; arguments?: string }[];
}

function isMessageLike(v: unknown): v is MessageLike {
  return typeof v === 'object' && v !== null && typeof (v as { role?: unknown }).role === 'string';
}

function messageText(m: MessageLike): string {
  const calls = (m.toolCalls ?? []).map((c) => `call ${c.name}(${c.arguments ?? ''})`);
  return [`${m.role}: ${contentText(m.content)}`, ...calls].join(' ');
}

/** One-line text of a step value; for chat messages only the last ones matter in a transcript. */
function valueText(value: unknown, lastOnly: boolean): string {
  let text: string;
  if (Array.isArray(value) && value.length > 0 && value.every(isMessageLike)) {
    const shown = lastOnly ? value.slice(-1) : value;
    text = shown.map(messageText).join(' | ');
  } else if (isMessageLike(value)) {
    text = messageText(value);
  } else {
    text = contentText(value);
  }
  return truncate(text.replace(/\s+/g, ' ').trim(), STEP_FIELD_CHARS);
}

function stepText(step: Step, index: number): string {
  const head = `#${index + 1} ${step.type}${step.name ? ` ${truncate(step.name, 100)}` : ''}`;
  const lines = [
    step.error
      ? `${head} ERROR: ${truncate(step.error.replace(/\s+/g, ' '), STEP_FIELD_CHARS)}`
      : head,
  ];
  // An llm step's input repeats the whole conversation so far; its last message is the news.
  if (isPresent(step.input)) lines.push(`  in: ${valueText(step.input, step.type === 'llm')}`);
  if (isPresent(step.output)) lines.push(`  out: ${valueText(step.output, false)}`);
  return lines.join('\n');
}

export interface Transcript {
  text: string;
  steps: number;
  omittedSteps: number;
}

/** A compact transcript of the trajectory, at most `maxChars`, keeping its start and its end. */
export function buildTranscript(
  trajectory: readonly Step[],
  maxChars = TRANSCRIPT_CHARS,
): Transcript {
  const blocks = trajectory.map(stepText);
  const total = blocks.reduce((n, b) => n + b.length + 1, 0);
  if (total <= maxChars) return { text: blocks.join('\n'), steps: blocks.length, omittedSteps: 0 };
  const marker = (n: number) => `… ${n} step${n === 1 ? '' : 's'} omitted …`;
  const budget = maxChars - marker(blocks.length).length - 2;
  const head: string[] = [];
  let used = 0;
  for (const b of blocks) {
    if (used + b.length + 1 > budget * HEAD_SHARE) break;
    head.push(b);
    used += b.length + 1;
  }
  const tail: string[] = [];
  for (let i = blocks.length - 1; i >= head.length; i--) {
    const b = blocks[i] as string;
    if (used + b.length + 1 > budget) break;
    tail.unshift(b);
    used += b.length + 1;
  }
  const omitted = blocks.length - head.length - tail.length;
  const text = [...head, marker(omitted), ...tail].join('\n');
  // A single enormous step can still overflow; clip as a last resort.
  return { text: clip(text, maxChars), steps: blocks.length, omittedSteps: omitted };
}

/** The agent's final answer: the last llm/agent step output, else the record's output. */
export function finalAnswer(record: EvalRecord): string | undefined {
  const steps = record.trajectory ?? [];
  for (let i = steps.length - 1; i >= 0; i--) {
    const step = steps[i] as Step;
    if ((step.type === 'llm' || step.type === 'agent') && isPresent(step.output)) {
      const text = outputText(step.output);
      if (text.trim() !== '') return text;
    }
  }
  return isPresent(record.output) ? outputText(record.output) : undefined;
}

const VerdictSchema = z.object({
  reasoning: z.string(),
  completed: z.boolean(),
  score: z.number().min(1).max(5),
});

/** Builds the judge request; exported for tests that check the transcript and fencing. */
export function buildGoalCompletionRequest(record: EvalRecord): {
  request: JudgeRequest;
  transcript: Transcript;
} {
  const transcript = buildTranscript(record.trajectory ?? []);
  const answer = finalAnswer(record);
  const fenced = fenceData([
    { name: 'goal', text: clip(contentText(record.input), MAX_GOAL_CHARS) },
    { name: 'transcript', text: transcript.text },
    {
      name: 'final-answer',
      text:
        answer === undefined ? '(the agent gave no final answer)' : clip(answer, MAX_ANSWER_CHARS),
    },
  ]);
  const system = [
    "You judge whether an AI agent achieved its user's goal.",
    'You get the goal (the user input), a transcript of what the agent did (one entry per step: type, name, input, output, and ERROR when the step failed; long values are cut and middle steps may be omitted), and the final answer.',
    'Decide whether the goal was achieved. Verify, do not trust: an action the final answer claims (booked, sent, saved, fixed) counts only if the transcript shows a step that did it without error. A partial result is not completion. A clarifying question or a refusal completes the goal only when the goal cannot or must not be done.',
    `${dataRules(fenced.nonce)} In this prompt, data-goal holds the user's goal, data-transcript the steps and data-final-answer the agent's final answer.`,
    'Answer with one JSON object and nothing else: {"reasoning": "<brief justification citing steps>", "completed": <true|false>, "score": <integer 1 to 5>} where 5 = fully achieved and verified in the transcript, 3 = partly achieved, 1 = not achieved.',
  ].join('\n\n');
  const user = `${fenced.text}\n\nWas the goal in data-goal achieved? Answer with the JSON object only.`;
  return {
    request: {
      messages: [
        { role: 'system', content: system },
        { role: 'user', content: user },
      ],
      promptVersion: GOAL_COMPLETION_PROMPT_VERSION,
      json: true,
      temperature: 0,
      maxTokens: 1024,
    },
    transcript,
  };
}

export const goalCompletionEvaluator = defineEvaluator({
  manifest: {
    type: 'goal-completion',
    description:
      "A judge model reads a compact transcript of the agent's trajectory and decides whether the user's goal was achieved, checking claimed actions against the steps.",
    needs: ['input', 'trajectory', 'judge'],
    scores: [
      { name: 'goal-completion', kind: 'number', range: [0, 1], higherIsBetter: true },
      { name: 'completed', kind: 'passed' },
    ],
    params: z.strictObject({}),
    cheap: false,
  },
  bind() {
    return {
      async evaluate(record, ctx) {
        if (ctx.judge === undefined) return { skip: 'no judge is configured' };
        const { request, transcript } = buildGoalCompletionRequest(record);
        const { verdict, response } = await askJudge(ctx.judge, request, VerdictSchema, ctx.signal);
        const metadata = {
          ...judgeMetadata(response, request.promptVersion, verdict.score),
          steps: transcript.steps,
          omittedSteps: transcript.omittedSteps,
        };
        return {
          scores: [
            {
              name: 'goal-completion',
              value: normalizeScore(verdict.score),
              explanation: explanation(verdict.reasoning),
              metadata,
            },
            { name: 'completed', passed: verdict.completed },
          ],
        };
      },
    };
  },
});
