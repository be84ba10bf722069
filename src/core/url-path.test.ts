import { describe, expect, it } from 'vitest';
import { withoutTrailingSlashes } from './url-path.js';

describe('withoutTrailingSlashes', () => {
  it('drops every trailing slash and nothing else', () => {
    expect(withoutTrailingSlashes('https://h/a/b///')).toBe('https://h/a/b');
    expect(withoutTrailingSlashes('/a//b')).toBe('/a//b');
    expect(withoutTrailingSlashes('///')).toBe('');
    expect(withoutTrailingSlashes('')).toBe('');
  });

  it('stays linear on long runs of slashes that do not end the string', () => {
    const hostile = `${'/'.repeat(200_000)}x`;
    const started = process.cpuUsage();
    expect(withoutTrailingSlashes(hostile)).toBe(hostile);
    const used = process.cpuUsage(started);
    expect((used.user + used.system) / 1000).toBeLessThan(500);
  });
});
