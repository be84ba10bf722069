/**
 * The part of the JS WebAssembly API the plug-in runtime uses. TypeScript declares it only in the
 * DOM library, which this Node project does not load.
 */
declare namespace WebAssembly {
  class Module {
    constructor(bytes: BufferSource);
  }
  class Memory {
    readonly buffer: ArrayBuffer;
    grow(delta: number): number;
  }
  class Instance {
    constructor(module: Module, imports?: Imports);
    readonly exports: Record<string, unknown>;
  }
  type ImportValue = ((...args: never[]) => unknown) | Memory;
  type Imports = Record<string, Record<string, ImportValue>>;
  function compile(bytes: BufferSource): Promise<Module>;
}
