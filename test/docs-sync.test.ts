import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { errorsDoc, openApiDoc, rolesDoc } from '../scripts/gen-docs.js';

describe('generated reference docs', () => {
  it('docs/errors.md lists every declared error code (run `npm run docs` after adding one)', () => {
    expect(readFileSync('docs/errors.md', 'utf8')).toBe(errorsDoc());
  });

  it('docs/roles.md matches the role table in src/auth/roles.ts', () => {
    expect(readFileSync('docs/roles.md', 'utf8')).toBe(rolesDoc());
  });

  it('docs/openapi.json is the document the server serves (run `npm run docs` after an API change)', () => {
    expect(readFileSync('docs/openapi.json', 'utf8')).toBe(openApiDoc());
  });
});
