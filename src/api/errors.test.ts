import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { ERROR_KINDS, TouchstoneError } from '../core/index.js';
import { httpStatusOf, KIND_WIRE } from './errors.js';
import { statusBody } from './otlp-wire.js';
import { connectErrorFromBody, toConnectError } from './rpc/errors.js';

const log = pino({ enabled: false });

function errorOf(kind: (typeof ERROR_KINDS)[number]): TouchstoneError {
  return new TouchstoneError({ code: 'X', kind, retryable: false, doc: '' }, 'refused');
}

describe('the error-kind table', () => {
  it('gives every kind an HTTP status and a gRPC code', () => {
    expect(Object.keys(KIND_WIRE).sort()).toEqual([...ERROR_KINDS].sort());
  });

  it('is what REST, OTLP and Connect RPC answer for each kind', () => {
    for (const kind of ERROR_KINDS) {
      const { http, grpc } = KIND_WIRE[kind];
      expect(httpStatusOf(kind), kind).toBe(http);
      expect(toConnectError(errorOf(kind), 'req-1', log).code, kind).toBe(grpc);
      expect(JSON.parse(String(statusBody('json', grpc, 'refused'))), kind).toEqual({
        code: grpc,
        message: 'refused',
      });
      expect(connectErrorFromBody(http, { error: { kind, message: 'm' } }, 'req-1').code).toBe(
        grpc,
      );
    }
  });
});
