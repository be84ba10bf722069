import { describe, expect, it } from 'vitest';
import { CliExit } from './io.js';
import { serverUrl } from './target.js';

describe('serverUrl', () => {
  it('takes HOST:PORT without a scheme as http, or https on port 443', () => {
    expect(serverUrl('127.0.0.1:4318')).toBe('http://127.0.0.1:4318');
    expect(serverUrl('localhost:4318')).toBe('http://localhost:4318');
    expect(serverUrl('[::1]:4318')).toBe('http://[::1]:4318');
    expect(serverUrl('evals.example.com')).toBe('http://evals.example.com');
    expect(serverUrl('evals.example.com:443')).toBe('https://evals.example.com');
    expect(serverUrl('evals.example.com:443/touchstone')).toBe(
      'https://evals.example.com/touchstone',
    );
  });

  it('keeps a URL with a scheme as it is', () => {
    expect(serverUrl('http://127.0.0.1:4318/')).toBe('http://127.0.0.1:4318');
    expect(serverUrl('https://evals.example.com:8443/base')).toBe(
      'https://evals.example.com:8443/base',
    );
    expect(serverUrl('HTTP://Host:80')).toBe('http://host');
  });

  it('refuses what is not an http(s) server, naming where it came from, without echoing it', () => {
    const refused = (raw: string, source?: string) => {
      try {
        serverUrl(raw, source);
      } catch (err) {
        expect(err).toBeInstanceOf(CliExit);
        expect((err as CliExit).code).toBe(2);
        return (err as CliExit).message;
      }
      throw new Error(`accepted ${raw}`);
    };
    expect(refused('ftp://files.example.com')).toBe('--server must be an http:// or https:// URL');
    expect(refused('http://bad host:1', 'TOUCHSTONE_SERVER')).toBe(
      'TOUCHSTONE_SERVER is not a URL: expected http://HOST:PORT, https://HOST or HOST:PORT',
    );
    expect(refused('host:99999')).toContain('is not a URL');
  });
});
