#!/usr/bin/env node
// The target of examples/run.yaml: a stand-in for your agent that reads a question on stdin and
// answers on stdout, from a table (no model, no API key). It gets one answer wrong on purpose, so
// the run's metrics are not all perfect.
const ANSWERS = {
  'What is the capital of France?': 'Paris',
  'What is 2 + 2?': '4',
  'Which planet is the largest?': 'Saturn',
};

let question = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  question += chunk;
});
process.stdin.on('end', () => {
  process.stdout.write(`${ANSWERS[question.trim()] ?? 'I do not know.'}\n`);
});
