import { DatasetErrors } from './error-codes.js';

/**
 * The names under the dataset root. A published dataset lives at
 * `datasets/<project>/<name>/<sha256>.jsonl` (what an upload returns as `path` and a run spec
 * takes as `dataset.path`), its details at `meta/<project>/<name>/<sha256>.json`; objects to
 * import sit under `incoming/<project>/`.
 */

export const PROJECT_PATTERN = /^[a-z0-9][a-z0-9_.-]{0,62}$/;
export const NAME_PATTERN = /^[a-z0-9][a-z0-9_.-]{0,127}$/;
const DATASET_PATH =
  /^datasets\/([a-z0-9][a-z0-9_.-]{0,62})\/([a-z0-9][a-z0-9_.-]{0,127})\/([0-9a-f]{64})\.jsonl$/;

export function datasetPath(project: string, name: string, sha256: string): string {
  return `datasets/${project}/${name}/${sha256}.jsonl`;
}

/**
 * Where a published dataset's details (its record count) are kept:
 * `meta/<project>/<name>/<sha256>.json`, outside `datasets/` so that prefix holds only datasets.
 */
export function datasetMetaPath(path: string): string {
  return `meta/${path.slice('datasets/'.length, -'.jsonl'.length)}.json`;
}

/** The parts of a published dataset's key, or undefined for another key. */
export function datasetKeyParts(
  key: string,
): { project: string; name: string; sha256: string } | undefined {
  const m = DATASET_PATH.exec(key);
  if (m === null) return undefined;
  const [, project, name, sha256] = m as unknown as [string, string, string, string];
  return { project, name, sha256 };
}

/** The parts of a dataset path, or DATASET_PATH_INVALID naming what is wrong. */
export function parseDatasetPath(
  path: string,
  project: string,
): { project: string; name: string; sha256: string } {
  const parts = datasetKeyParts(path);
  if (parts === undefined) {
    throw DatasetErrors.DATASET_PATH_INVALID(
      'dataset.path must be a path an upload returned: datasets/<project>/<name>/<sha256>.jsonl',
      {
        details: [
          {
            path: 'dataset.path',
            message: 'not of the form datasets/<project>/<name>/<sha256>.jsonl',
          },
        ],
      },
    );
  }
  if (parts.project !== project) {
    throw DatasetErrors.DATASET_PATH_INVALID(
      `dataset.path belongs to project "${parts.project}", not "${project}"`,
      { details: [{ path: 'dataset.path', message: `belongs to project "${parts.project}"` }] },
    );
  }
  return parts;
}

/**
 * Checks a key relative to the root names an object under `incoming/<project>/`: slash-separated
 * segments, none empty, `.` or `..`, no backslash or control character.
 */
export function checkIncomingKey(key: string, project: string): string {
  const refuse = (why: string) =>
    DatasetErrors.DATASET_URI_REFUSED(
      `the import uri must name an object under the dataset root's incoming/${project}/ prefix: ${why}`,
      { details: [{ path: 'uri', message: why }] },
    );
  if (key.length > 1024) throw refuse('it is longer than 1024 characters');
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
  if (/[\u0000-\u001f\u007f\\]/.test(key))
    throw refuse('it contains a backslash or control character');
  const segments = key.split('/');
  if (segments.some((s) => s === '' || s === '.' || s === '..')) {
    throw refuse('it has an empty, "." or ".." segment');
  }
  if (segments[0] !== 'incoming' || segments[1] !== project || segments.length < 3) {
    throw refuse(`it is not under incoming/${project}/`);
  }
  return key;
}
