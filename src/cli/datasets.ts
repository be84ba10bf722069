import { readFileSync, statSync } from 'node:fs';
import type { Command } from 'commander';
import type { Principal } from '../auth/index.js';
import type {
  DatasetFormat,
  DatasetService,
  DatasetUploadResult,
  DatasetView,
} from '../datasets/index.js';
import { EXIT } from './exit-codes.js';
import { CliExit, type CliIO } from './io.js';
import { BYTES, ProgressDisplay } from './progress.js';
import { listResources, type ResourceFlags, type ResourceScope } from './resources.js';
import { configFromFlags } from './serve.js';
import { remoteOrLocal, type TargetFlags, targetOptions } from './target.js';

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

async function readUpload(file: string): Promise<Buffer> {
  const { DATASET_LIMITS } = await import('../datasets/index.js');
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

function idempotencyHeader(flags: DatasetFlags): Record<string, string> {
  return flags.idempotencyKey === undefined ? {} : { 'idempotency-key': flags.idempotencyKey };
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
  flags: TargetFlags,
  io: CliIO,
  fn: (service: DatasetService, caller: Principal) => Promise<T>,
): Promise<T> {
  const config = configFromFlags(flags, io);
  const kit = await import('./local.js');
  const service = kit.createDatasetService(config, { env: io.env, logger: kit.silentLogger() });
  try {
    return await fn(service, kit.OPEN_PRINCIPAL);
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

/** Runs against a server, or on the local configuration's dataset root. */
const withDatasets: ResourceScope<DatasetService> = (flags, io, remote, local) =>
  remoteOrLocal(flags, io, remote, () => locally(flags, io, local));

export function datasetsCommand(program: Command, io: CliIO): void {
  const datasets = program
    .command('datasets')
    .description('List, upload and import datasets for offline runs (docs/datasets.md).');

  targetOptions(
    datasets
      .command('list')
      .description(
        "List a project's published datasets: the paths a run spec's dataset.path takes.",
      )
      .option('-p, --project <name>', "project (default: the key's project, or default)"),
  ).action(async (flags: ResourceFlags) => {
    await listResources<DatasetView>(
      withDatasets,
      flags,
      io,
      'datasets',
      ['NAME', 'RECORDS', 'BYTES', 'UPLOADED', 'PATH'],
      (d) => [
        d.name,
        d.records === undefined ? '-' : String(d.records),
        String(d.bytes),
        d.uploadedAt,
        d.path,
      ],
    );
  });

  datasetOptions(
    datasets
      .command('upload <file>')
      .description(
        'Upload a JSON Lines or Parquet file; prints the path a run spec takes as dataset.path.',
      ),
  ).action(async (file: string, flags: DatasetFlags) => {
    const format = formatOf(file, flags.format);
    const body = await readUpload(file);
    const query = new URLSearchParams({
      ...(flags.project === undefined ? {} : { project: flags.project }),
      ...(format === undefined ? {} : { format }),
    }).toString();
    const result = await remoteOrLocal(
      flags,
      io,
      async (c) => {
        // Bytes sent of the file (a bar on a terminal, a line every 5 s otherwise).
        const progress = new ProgressDisplay(io.stderr, { unit: BYTES, plainFirstAfterMs: 5_000 });
        try {
          return await c.callRaw<DatasetUploadResult>(
            'POST',
            `v1alpha1/datasets/${encodeURIComponent(flags.name)}/upload${query === '' ? '' : `?${query}`}`,
            {
              data: body,
              contentType: format === undefined ? 'application/octet-stream' : CONTENT_TYPE[format],
            },
            idempotencyHeader(flags),
            (sent, total) => progress.update(sent, total, 'uploading'),
          );
        } finally {
          progress.end();
        }
      },
      () =>
        locally(flags, io, (service, caller) =>
          service.upload(caller, { project: flags.project, name: flags.name, format }, body),
        ),
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
    const result = await remoteOrLocal(
      flags,
      io,
      async (c) => {
        const imported = await c.call<{ path: string; records: string; sha256: string }>(
          'POST',
          'touchstone.v1alpha1.DatasetService/ImportDataset',
          { config: { project: flags.project ?? '', name: flags.name, format: format ?? '' }, uri },
          idempotencyHeader(flags),
        );
        return { ...imported, records: Number(imported.records) };
      },
      () =>
        locally(flags, io, (service, caller) =>
          service.import(caller, { project: flags.project, name: flags.name, format, uri }),
        ),
    );
    print(io, flags, result);
  });
}
