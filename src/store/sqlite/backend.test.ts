import BetterSqlite3 from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { withStatementCache } from './backend.js';

describe('the SQLite statement cache', () => {
  const raw = new BetterSqlite3(':memory:');
  afterEach(() => raw.exec('drop table if exists t'));

  it('compiles a statement once and reuses it; a busy one (being iterated) is not shared', () => {
    raw.exec('create table t (x integer)');
    const db = withStatementCache(raw);
    const insert = db.prepare('insert into t (x) values (?)');
    expect(db.prepare('insert into t (x) values (?)')).toBe(insert);
    for (let i = 0; i < 3; i++) insert.run([i]);
    const select = db.prepare('select x from t order by x');
    const iterator = select.iterate([]);
    iterator.next();
    const again = db.prepare('select x from t order by x');
    expect(again).not.toBe(select);
    expect(again.all([])).toEqual([{ x: 0 }, { x: 1 }, { x: 2 }]);
    iterator.return?.();
    expect(db.prepare('select x from t order by x')).toBe(select);
  });

  it('keeps at most 256 statements, dropping the least recently used', () => {
    const db = withStatementCache(raw);
    const first = db.prepare('select 0');
    const second = db.prepare('select 1');
    for (let i = 2; i <= 255; i++) db.prepare(`select ${i}`);
    expect(db.prepare('select 0')).toBe(first); // now the most recent
    db.prepare('select 256'); // evicts `select 1`, the least recently used
    expect(db.prepare('select 0')).toBe(first);
    expect(db.prepare('select 1')).not.toBe(second);
  });
});
