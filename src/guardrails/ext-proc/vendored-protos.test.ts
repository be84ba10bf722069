import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const DIR = join('proto', 'envoy-ext-proc');

// SHA-256 of every vendored file (proto/envoy-ext-proc/README.md says where they come from).
const VENDORED: Record<string, string> = {
  LICENSE: 'cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30',
  'envoy/annotations/deprecation.proto':
    '64af0d3b34f517899a05f530d4d5597d3495d72daf3e61e5da5f9b8bf0291b9a',
  'envoy/config/core/v3/address.proto':
    'b65ff45ac25830d4ffff7fe370f152a92cd6cc880d859109d591fc6ab114bd12',
  'envoy/config/core/v3/backoff.proto':
    '6357b234c4fe90084f330de9e2b53c0be9a5b40b82bfbe4d3339bf21ddb4d857',
  'envoy/config/core/v3/base.proto':
    '7100d55f77dc8ae318ab9ebed11fbcd90afa44dd6c14511e3ee2312397edc9fe',
  'envoy/config/core/v3/extension.proto':
    '9ed81e39f1c1c1e121336d04f87e711e597f62e0df79e790fb31c8efc70c1ece',
  'envoy/config/core/v3/http_uri.proto':
    '9b5ee5cdd55149ea94859bf83f8aee180b602400b9ba976405a2265f0fcf054c',
  'envoy/config/core/v3/socket_option.proto':
    '51af907f01fa5105c0c371b9645ea42ac82d3f38f930b5185c064a573f06b6eb',
  'envoy/extensions/filters/http/ext_proc/v3/processing_mode.proto':
    '62e8709c61ebfc2b04924235f98af3e4ea6b83f8c618027e014c5a47132996d1',
  'envoy/service/ext_proc/v3/external_processor.proto':
    'be8c61ed435d8d3118f7663d094e5c2b1818bcab475241958062b6c92fadbbc9',
  'envoy/type/v3/http_status.proto':
    '1abe54fe494b079b9c879156ca93e39ae1e1a4fe9ee38b41dc08e78640f110c6',
  'envoy/type/v3/percent.proto': '8fd615d0d0676bcbaf9dcda971066a8e2108b51c14e36ccf1be7b639e958b24b',
  'envoy/type/v3/semantic_version.proto':
    'ee3d8ec40fa9024dccee9411e4e9b536f1fd788ce88102fac31efbd706116fc3',
  'udpa/annotations/migrate.proto':
    '90d855b75b1174b96e65915d93402756716036f30797d5de0faca2297ae2d528',
  'udpa/annotations/status.proto':
    '7a24aa255f54940986bf775c2c2affb3c57136173a1461f4167a046dec885246',
  'udpa/annotations/versioning.proto':
    'acd27bfb3f023f47a50521bfc89c84dc247b03fd87a9f7eea22b9735ae6c730b',
  'validate/validate.proto': 'e56269caa0b6e3531055275cfef9539af46606e8ed26bfc8f615cf9f75b41d71',
  'xds/annotations/v3/status.proto':
    '64863c619e76931aba5fc1bb5c31eb04867f1a33ee6bc07f3a6969625800b374',
  'xds/core/v3/context_params.proto':
    '44a53be3f020fb091ae4a175abc933fac52b7508ea6b422ca816eb2547568e2b',
};

/** Every file under a directory, as paths relative to it. */
function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path).map((f) => join(name, f)) : [name];
  });
}

describe('vendored Envoy ext_proc protos', () => {
  it('are exactly the listed files, with the Apache-2.0 licence text beside them', () => {
    const present = files(DIR)
      .map((f) => relative('.', f))
      .filter((f) => f !== 'README.md');
    expect(present.sort()).toEqual(Object.keys(VENDORED).sort());
    expect(readFileSync(join(DIR, 'LICENSE'), 'utf8')).toMatch(/Apache License\s+Version 2\.0/);
  });

  it.each(Object.entries(VENDORED))('%s is kept byte for byte', (file, sha256) => {
    const digest = createHash('sha256')
      .update(readFileSync(join(DIR, file)))
      .digest('hex');
    expect(digest).toBe(sha256);
  });
});
