/** The fuzz targets by name, for the CI test and the long fuzz (bench/fuzz.ts). */
import { createCelTarget } from './cel.js';
import { createDatasetsTarget } from './datasets.js';
import type { FuzzTarget } from './driver.js';
import { createOtlpTarget } from './otlp.js';
import { createYamlTarget } from './yaml.js';

const targets = {
  otlp: createOtlpTarget,
  datasets: createDatasetsTarget,
  cel: createCelTarget,
  yaml: createYamlTarget,
};

/** The seed of the CI run, and the long run's unless one is given. */
export const FUZZ_SEED = 0x5eed;

export type FuzzTargetName = keyof typeof targets;

export type FuzzTargetFactory = () => Promise<FuzzTarget<unknown>>;

export const FUZZ_TARGETS: Readonly<Record<FuzzTargetName, FuzzTargetFactory>> = targets;
