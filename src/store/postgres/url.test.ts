import { describe, expect, it } from 'vitest';
import { describePostgresUrl } from './url.js';

describe('describePostgresUrl', () => {
  it('names host, port and database only', () => {
    expect(describePostgresUrl('postgres://app:s3cret@db.internal:6543/touchstone')).toBe(
      'db.internal:6543/touchstone',
    );
    expect(describePostgresUrl('postgresql://app@db/touchstone?sslmode=require')).toBe(
      'db:5432/touchstone',
    );
    expect(describePostgresUrl('postgres://app:pw@/touchstone?host=/run/postgresql')).toBe(
      '/run/postgresql:5432/touchstone',
    );
  });

  it('never echoes a password, in the user part or the query', () => {
    for (const url of [
      'postgres://app:s3cret@db/x?password=s3cret',
      'postgres://app:s3cret@[::1/x',
      'mysql://app:s3cret@db/x',
      'app:s3cret',
    ]) {
      let text: string;
      try {
        text = describePostgresUrl(url);
      } catch (err) {
        expect(err).toMatchObject({ code: 'STORE_CONFIG_INVALID' });
        text = `${(err as Error).message} ${String((err as Error).cause)}`;
      }
      expect(text).not.toContain('s3cret');
    }
  });

  it('refuses other schemes', () => {
    expect(() => describePostgresUrl('mysql://db/x')).toThrow(/postgres:\/\//);
  });
});
