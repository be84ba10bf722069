import { describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../config/index.js';
import { isTouchstoneError } from '../../core/index.js';
import { DEFAULT_CONNECTOR_SETTINGS } from '../connector.js';
import { parseSource } from '../resource.js';
import { BUILTIN_CONNECTORS, CONNECTOR_FACTORIES } from './index.js';
import { ConnectorRegistry, refusedVariant } from './registry.js';
import { toyConnector, toySource } from './toy.testkit.js';

function failure(run: () => unknown): { code: string; details: unknown } | undefined {
  try {
    run();
  } catch (err) {
    if (isTouchstoneError(err)) return { code: err.code, details: err.details };
    throw err;
  }
  return undefined;
}

describe('connector registry', () => {
  it('refuses a type or a variant declared twice', () => {
    const { factory } = toyConnector(['list', 'fetch']);
    expect(() => new ConnectorRegistry([factory, toyConnector(['list', 'fetch']).factory])).toThrow(
      'connector toy registered twice',
    );
    const eu = toyConnector(['list', 'fetch'], 'eu').factory;
    expect(
      () => new ConnectorRegistry([factory, eu, toyConnector(['list', 'fetch'], 'eu').factory]),
    ).toThrow('connector toy/eu registered twice');
    expect(
      () =>
        new ConnectorRegistry([
          ...CONNECTOR_FACTORIES,
          refusedVariant('mlflow', 'databricks', 'no'),
        ]),
    ).toThrow('connector mlflow/databricks registered twice');
    expect(new ConnectorRegistry([factory, eu]).types()).toEqual(['toy']);
  });

  it('refuses a connector that cannot list and fetch', () => {
    expect(() => new ConnectorRegistry([toyConnector(['list', 'write-back']).factory])).toThrow(
      'connector toy must list and fetch',
    );
  });

  it('builds every type and the Databricks and SageMaker variants; azureml is refused', () => {
    expect(BUILTIN_CONNECTORS.types()).toEqual(['mlflow', 'phoenix', 'langfuse']);
    expect(BUILTIN_CONNECTORS.variants()).toEqual(['databricks', 'sagemaker', 'azureml']);
    expect(BUILTIN_CONNECTORS.find('mlflow', undefined)).toBeDefined();
    expect(BUILTIN_CONNECTORS.find('mlflow', 'databricks')).toBeDefined();
    expect(BUILTIN_CONNECTORS.find('mlflow', 'sagemaker')).toBeDefined();
    expect(BUILTIN_CONNECTORS.find('mlflow', 'azureml')).toBeUndefined();
    expect(BUILTIN_CONNECTORS.get('mlflow', 'databricks')?.manifest.capabilities).toContain(
      'long-running-search',
    );
  });

  it('a build without server settings uses the traces.max_attribute_bytes default', () => {
    expect(DEFAULT_CONNECTOR_SETTINGS.maxAttributeBytes).toBe(DEFAULTS.traces.maxAttributeBytes);
  });
});

describe('a connector declared outside the built-in list', () => {
  const toy = toyConnector(['list', 'fetch']);
  const registry = new ConnectorRegistry([toy.factory]);

  it('gets its part of the spec validated by its own schema', () => {
    expect(failure(() => parseSource(toySource({ locations: ['eu-1'] }), registry))).toEqual({
      code: 'SOURCE_INVALID',
      details: [{ path: 'spec.locations', message: 'toy reads exactly two regions' }],
    });
    expect(
      failure(() => parseSource(toySource({ locations: ['eu-1', 'moon'] }), registry)),
    ).toEqual({
      code: 'SOURCE_INVALID',
      details: [{ path: 'spec.locations[1]', message: 'a toy region such as eu-1' }],
    });
    expect(
      failure(() => parseSource(toySource({ auth: { toy: { tenant: '' } } }), registry))?.details,
    ).toEqual([{ path: 'spec.auth.toy.tenant', message: expect.any(String) }]);
    // Only the declarations in the registry exist: the built-in auth keys and types are unknown.
    expect(
      failure(() => parseSource(toySource({ auth: { sigv4: {} } }), registry))?.details,
    ).toEqual([{ path: 'spec.auth.sigv4', message: 'unknown field' }]);
    expect(failure(() => parseSource(toySource({ connector: 'mlflow' }), registry))?.code).toBe(
      'SOURCE_INVALID',
    );
    expect(failure(() => parseSource(toySource(), BUILTIN_CONNECTORS))?.code).toBe(
      'SOURCE_INVALID',
    );
  });

  it('is built with the config its schema gives and the settings passed in', () => {
    const source = parseSource(toySource(), registry);
    registry
      .find('toy', undefined)
      ?.create(source, { http: undefined as never, settings: { maxAttributeBytes: 123 } });
    expect(toy.built).toEqual([
      { config: { url: 'http://127.0.0.1:9/', regions: ['eu-1', 'us-2'] }, maxAttributeBytes: 123 },
    ]);
  });

  it('a variant applies only to the types that declare it', () => {
    const withVariant = new ConnectorRegistry([
      toy.factory,
      toyConnector(['list', 'fetch'], 'eu').factory,
      ...CONNECTOR_FACTORIES,
    ]);
    expect(
      parseSource(toySource({ variant: 'eu', auth: { toyeu: { tenant: 't' } } }), withVariant).spec
        .variant,
    ).toBe('eu');
    expect(
      failure(() => parseSource(toySource({ variant: 'databricks' }), withVariant))?.details,
    ).toEqual([{ path: 'spec.variant', message: 'a variant applies only to connector mlflow' }]);
    const variantsOnly = new ConnectorRegistry([toyConnector(['list', 'fetch'], 'eu').factory]);
    expect(failure(() => parseSource(toySource(), variantsOnly))?.details).toEqual([
      { path: 'spec.variant', message: 'connector toy needs a variant' },
    ]);
    expect(failure(() => parseSource(toySource({ variant: 'azureml' }), withVariant))?.code).toBe(
      'SOURCE_VARIANT_REFUSED',
    );
  });
});

describe('capabilities', () => {
  it('writeBack.enabled needs a connector that declares write-back', () => {
    const readOnly = new ConnectorRegistry([toyConnector(['list', 'fetch']).factory]);
    const writes = new ConnectorRegistry([toyConnector(['list', 'fetch', 'write-back']).factory]);
    const spec = { writeBack: { enabled: true } };
    expect(failure(() => parseSource(toySource(spec), readOnly))).toEqual({
      code: 'SOURCE_INVALID',
      details: [{ path: 'spec.writeBack.enabled', message: 'connector toy does not write back' }],
    });
    expect(parseSource(toySource(spec), writes).spec.writeBack.enabled).toBe(true);
    expect(parseSource(toySource(), readOnly).spec.writeBack.enabled).toBe(false);
  });

  it('every built-in connector declares write-back', () => {
    for (const f of CONNECTOR_FACTORIES.filter((c) => c.refused === undefined)) {
      expect(f.manifest.capabilities, f.manifest.type).toContain('write-back');
    }
  });
});
