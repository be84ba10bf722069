import { readFileSync, statSync } from 'node:fs';
import type { Command } from 'commander';
import { pino } from 'pino';
import { OPEN_PRINCIPAL } from '../auth/index.js';
import {
  createDatasetService,
  DATASET_LIMITS,
  type DatasetFormat,
  type DatasetUploadResult,
} from '../datasets/index.js';
import { EXIT } from './exit-codes.js';
import { CliExit, type CliIO } from './io.js';
import { configFromFlags } from './serve.js';
import { type TargetFlags, targetOptions } from './target.js';

interface DatasetFlags extends TargetFlags {
  name: string;
  format?: string;
  project?: string;
  idempotencyKey?: string;
}

const CONTENT_TYPE: Readonly<Record<DatasetFormat, string>> = {
  jsonl: 'application/jsonl',
  parquet: 'application/vnd.apache.parquet',
};

/** The format a file's extension names; undefined = the server sniffs the content. */
function formatOf(file: string, given: string | undefined): DatasetFormat | undefined {
  if (given !== undefined) {
    if (given !== 'jsonl' && given !== 'parquet') {
      throw new CliExit(EXIT.USAGE, `--format ${given}: expected jsonl or parquet`);
    }
    return given;
  }
  const lower = file.toLowerCase();
  if (lower.endsWith('.parquet') || lower.endsWith('.pq')) return 'parquet';
  if (lower.endsWith('.jsonl') || lower.endsWith('.ndjson') || lower.endsWith('.json')) {
    return 'jsonl';
  }
  return undefined;
}

function readUpload(file: string): Buffer {
  let size: number;
  try {
    size = statSync(file).size;
  } catch (err) {
    throw new CliExit(EXIT.USAGE, `cannot read ${file}: ${(err as NodeJS.ErrnoException).code}`);
  }
  if (size > DATASET_LIMITS.maxUploadBytes) {
    throw new CliExit(
      EXIT.USAGE,
      `${file} has ${size} bytes; a dataset upload is at most 64 MiB (${DATASET_LIMITS.maxUploadBytes} bytes): split it`,
    );
  }
  return readFileSync(file);
}

/** A REST or Connect call with a raw or JSON body; errors as the other commands print them. */
async function send<T>(
  server: string,
  path: string,
  init: { body: Buffer | string; contentType: string; apiKey?: string; idempotencyKey?: string },
): Promise<T> {
  const url = new URL(path, server.endsWith('/') ? server : `${server}/`);
  let response: Response;
  try {
    response = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': init.contentType,
        ...(init.apiKey === undefined ? {} : { authorization: `Bearer ${init.apiKey}` }),
        ...(init.idempotencyKey === undefined ? {} : { 'idempotency-key': init.idempotencyKey }),
      },
      body: init.body,
    });
  } catch (err) {
    const cause = (err as Error).cause instanceof Error ? ((err as Error).cause as Error) : err;
    throw new CliExit(
      EXIT.ERROR,
      `cannot reach the server at ${server} (${(cause as Error).message}); is \`touchstone serve\` running?`,
    );
  }
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = text === '' ? {} : JSON.parse(text);
  } catch {
    throw new CliExit(
      EXIT.ERROR,
      `the server answered ${response.status} with a body that is not JSON`,
    );
  }
  if (response.ok) return parsed as T;
  // REST errors are {"error": {...}}; Connect errors are {"code", "message"}.
  const body = parsed as {
    error?: {
      code?: string;
      message?: string;
      requestId?: string;
      details?: { path: string; message: string }[];
    };
    code?: string;
    message?: string;
  };
  const code = body.error?.code ?? response.headers.get('touchstone-error-code') ?? body.code;
  const message = body.error?.message ?? body.message ?? 'request failed';
  const details = (body.error?.details ?? []).map((d) => `\n  ${d.path}: ${d.message}`).join('');
  const requestId = body.error?.requestId ?? response.headers.get('x-request-id');
  const hint =
    response.status === 401
      ? '\nSet TOUCHSTONE_API_KEY to an API key (touchstone keys create).'
      : '';
  throw new CliExit(
    response.status === 400 ? EXIT.USAGE : EXIT.ERROR,
    `${code ?? response.status}: ${message}${details}${hint}${requestId ? `\n(request id ${requestId})` : ''}`,
  );
}

function print(io: CliIO, flags: { json?: boolean }, result: DatasetUploadResult): void {
  io.stdout.write(
    flags.json
      ? `${JSON.stringify({ ...result, records: Number(result.records) }, null, 2)}\n`
      : `${result.path}\n`,
  );
}

/** The local data dir's dataset service, as the server would build it from the same config. */
async function locally<T>(
  flags: DatasetFlags,
  io: CliIO,
  fn: (service: ReturnType<typeof createDatasetService>) => Promise<T>,
): Promise<T> {
  const config = configFromFlags(flags, io);
  const service = createDatasetService(config, {
    env: io.env,
    logger: pino({ level: 'silent' }),
  });
  try {
    return await fn(service);
  } finally {
    await service.close();
  }
}

function datasetOptions(cmd: Command): Command {
  return targetOptions(
    cmd
      .requiredOption('-n, --name <name>', 'dataset name (lowercase letters, digits, _ . -)')
      .option('-p, --project <name>', "project (default: the key's project, or default)")
      .option('--format <format>', 'jsonl or parquet (default: from the extension)')
      .option(
        '--idempotency-key <key>',
        'retry safely: the same key and file answer the first outcome',
      ),
  );
}

export function datasetsCommand(program: Command, io: CliIO): void {
  const datasets = program
    .command('datasets')
    .description('Upload and import datasets for offline runs (docs/datasets.md).');

  datasetOptions(
    datasets
      .command('upload <file>')
      .description(
        'Upload a JSON Lines or Parquet file; prints the path a run spec takes as dataset.path.',
      ),
  ).action(async (file: string, flags: DatasetFlags) => {
    const format = formatOf(file, flags.format);
    const body = readUpload(file);
    const server = flags.server ?? io.env.TOUCHSTONE_SERVER;
    if (server !== undefined && server !== '') {
      const query = new URLSearchParams({
        ...(flags.project === undefined ? {} : { project: flags.project }),
        ...(format === undefined ? {} : { format }),
      }).toString();
      const result = await send<DatasetUploadResult>(
        server,
        `v1alpha1/datasets/${encodeURIComponent(flags.name)}/upload${query === '' ? '' : `?${query}`}`,
        {
          body,
          contentType: format === undefined ? 'application/octet-stream' : CONTENT_TYPE[format],
          ...(io.env.TOUCHSTONE_API_KEY === undefined ? {} : { apiKey: io.env.TOUCHSTONE_API_KEY }),
          ...(flags.idempotencyKey === undefined ? {} : { idempotencyKey: flags.idempotencyKey }),
        },
      );
      print(io, flags, result);
      return;
    }
    const result = await locally(flags, io, (service) =>
      service.upload(OPEN_PRINCIPAL, { project: flags.project, name: flags.name, format }, body),
    );
    print(io, flags, result);
  });

  datasetOptions(
    datasets
      .command('import <uri>')
      .description(
        "Import an object under the dataset root's incoming/<project>/ (s3://… or incoming/<project>/…); prints its dataset path.",
      ),
  ).action(async (uri: string, flags: DatasetFlags) => {
    const format = formatOf(uri, flags.format);
    const server = flags.server ?? io.env.TOUCHSTONE_SERVER;
    if (server !== undefined && server !== '') {
      const result = await send<{ path: string; records: string; sha256: string }>(
        server,
        'touchstone.v1alpha1.DatasetService/ImportDataset',
        {
          body: JSON.stringify({
            config: { project: flags.project ?? '', name: flags.name, format: format ?? '' },
            uri,
          }),
          contentType: 'application/json',
          ...(io.env.TOUCHSTONE_API_KEY === undefined ? {} : { apiKey: io.env.TOUCHSTONE_API_KEY }),
          ...(flags.idempotencyKey === undefined ? {} : { idempotencyKey: flags.idempotencyKey }),
        },
      );
      print(io, flags, { ...result, records: Number(result.records) });
      return;
    }
    const result = await locally(flags, io, (service) =>
      service.import(OPEN_PRINCIPAL, { project: flags.project, name: flags.name, format, uri }),
    );
    print(io, flags, result);
  });
}
