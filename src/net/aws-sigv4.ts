import type { SignatureV4 } from '@smithy/signature-v4';
import { onDemand } from '../core/index.js';

export interface AwsSignerOptions {
  /** The signing name: `s3`, `sagemaker`… */
  service: string;
  region: string;
  credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  /** Encode each path segment again to sign it: all services but S3 (it signs the path as sent). */
  uriEscapePath: boolean;
}

/** The AWS SigV4 signer and its SHA-256 (about 1 MB of heap), loaded at the first signature. */
const loadSigning = onDemand(async () => {
  const [{ Hash }, { SignatureV4 }] = await Promise.all([
    import('@smithy/hash-node'),
    import('@smithy/signature-v4'),
  ]);
  class Sha256 extends Hash {
    constructor(secret?: Parameters<typeof Hash.prototype.update>[0]) {
      super('sha256', secret);
    }
  }
  return { SignatureV4, Sha256 };
});

/**
 * A SigV4 signer for one service, region and credential, the payload checksum signed. Only a
 * process talking to S3 or SageMaker loads the signing code.
 */
export async function awsSigner(options: AwsSignerOptions): Promise<SignatureV4> {
  const { SignatureV4, Sha256 } = await loadSigning();
  return new SignatureV4({ ...options, sha256: Sha256, applyChecksum: true });
}
