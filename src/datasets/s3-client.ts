import { Hash } from '@smithy/hash-node';
import { SignatureV4 } from '@smithy/signature-v4';
import {
  type Clock,
  isTouchstoneError,
  type TouchstoneError,
  withoutTrailingSlashes,
} from '../core/index.js';
import type { HttpClient, HttpMethod, HttpResponse } from '../net/index.js';
import { DatasetErrors } from './error-codes.js';

/** Access keys for SigV4; resolved at every request so rotated secrets apply at once. */
export interface S3Credentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

export interface S3ClientOptions {
  /** `https://s3.eu-west-1.amazonaws.com`, `http://minio.internal:9000`. */
  endpoint: string;
  region: string;
  bucket: string;
  /** `<endpoint>/<bucket>/<key>` (true) or `<bucket>.<endpoint host>/<key>`. */
  pathStyle: boolean;
  credentials: () => Promise<S3Credentials>;
  /** The guarded outbound client (net/); the endpoint's host is allowed by the caller. */
  http: HttpClient;
  clock: Clock;
}

class Sha256 extends Hash {
  constructor(secret?: Parameters<typeof Hash.prototype.update>[0]) {
    super('sha256', secret);
  }
}

/** RFC 3986 encoding of one key segment, as S3's canonical URI wants it. */
function encodeSegment(segment: string): string {
  return encodeURIComponent(segment).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

/** S3's error code from an XML error body (`<Code>AccessDenied</Code>`), when it is plain. */
function s3ErrorCode(body: Buffer): string | undefined {
  const m = /<Code>([A-Za-z0-9.]{1,64})<\/Code>/.exec(body.subarray(0, 4096).toString('utf8'));
  return m?.[1];
}

/** The text of the first `<tag>` element in `xml`, entities decoded. */
function xmlText(xml: string, tag: string): string | undefined {
  const m = new RegExp(`<${tag}>([^<]*)</${tag}>`).exec(xml);
  if (m === null) return undefined;
  return (m[1] as string).replace(
    /&(lt|gt|quot|apos|amp|#\d+|#x[0-9a-fA-F]+);/g,
    (_all, e: string) => {
      const named: Record<string, string> = { lt: '<', gt: '>', quot: '"', apos: "'", amp: '&' };
      if (e in named) return named[e] as string;
      return String.fromCodePoint(
        e.startsWith('#x') ? Number.parseInt(e.slice(2), 16) : Number(e.slice(1)),
      );
    },
  );
}

/**
 * The object calls the dataset root needs (PutObject, GetObject, HeadObject, DeleteObject,
 * ListObjectsV2),
 * signed with SigV4 and sent through the product's guarded HTTP client. Errors name the operation,
 * the key and S3's status and error code, never a credential or a body.
 */
export class S3Client {
  private readonly base: URL;

  constructor(private readonly options: S3ClientOptions) {
    this.base = new URL(options.endpoint);
  }

  /** `s3://bucket` plus the key, for messages. */
  describe(key: string): string {
    return `s3://${this.options.bucket}/${key}`;
  }

  private url(key: string): URL {
    const path = key.split('/').map(encodeSegment).join('/');
    const url = new URL(this.base.toString());
    const prefix = withoutTrailingSlashes(url.pathname);
    if (this.options.pathStyle) {
      url.pathname = `${prefix}/${encodeSegment(this.options.bucket)}/${path}`;
    } else {
      url.hostname = `${this.options.bucket}.${url.hostname}`;
      url.pathname = `${prefix}/${path}`;
    }
    return url;
  }

  private async send(
    method: HttpMethod,
    key: string,
    options: {
      body?: Uint8Array;
      contentType?: string;
      maxResponseBytes?: number;
      query?: Record<string, string>;
    } = {},
  ): Promise<HttpResponse> {
    const url = this.url(key);
    const query = options.query ?? {};
    url.search = Object.entries(query)
      .map(([k, v]) => `${encodeSegment(k)}=${encodeSegment(v)}`)
      .join('&');
    const credentials = await this.options.credentials();
    const signer = new SignatureV4({
      service: 's3',
      region: this.options.region,
      credentials,
      sha256: Sha256,
      // S3 signs the path as sent (each segment encoded once).
      uriEscapePath: false,
      applyChecksum: true,
    });
    const headers: Record<string, string> = { host: url.host };
    if (options.contentType !== undefined) headers['content-type'] = options.contentType;
    if (options.body !== undefined) headers['content-length'] = String(options.body.length);
    const signed = await signer.sign(
      {
        method,
        protocol: url.protocol,
        hostname: url.hostname,
        ...(url.port === '' ? {} : { port: Number(url.port) }),
        path: url.pathname,
        query,
        headers,
        ...(options.body === undefined ? {} : { body: options.body }),
      },
      { signingDate: new Date(this.options.clock.now()) },
    );
    const sent: Record<string, string> = {};
    for (const [name, value] of Object.entries(signed.headers)) {
      // The HTTP client sets Host and Content-Length itself, to the same values that were signed.
      if (name.toLowerCase() !== 'host' && name.toLowerCase() !== 'content-length') {
        sent[name] = value;
      }
    }
    try {
      return await this.options.http.request({
        method,
        url,
        headers: sent,
        ...(options.body === undefined ? {} : { body: options.body }),
        ...(options.maxResponseBytes === undefined
          ? {}
          : { maxResponseBytes: options.maxResponseBytes }),
      });
    } catch (err) {
      throw this.transportFailure(method, key, err);
    }
  }

  private transportFailure(method: HttpMethod, key: string, err: unknown): TouchstoneError {
    if (!isTouchstoneError(err)) {
      return DatasetErrors.DATASET_STORAGE_FAILED(`${method} ${this.describe(key)} failed`, {
        cause: err,
      });
    }
    if (err.code === 'OUTBOUND_RESPONSE_TOO_LARGE') {
      return DatasetErrors.DATASET_TOO_LARGE(
        `${this.describe(key)} is larger than the dataset upload limit`,
      );
    }
    // The net error names the method and host (never a path or credential).
    if (err.kind === 'permission_denied' || err.kind === 'invalid_argument') {
      return DatasetErrors.DATASET_STORAGE_REFUSED(
        `${method} ${this.describe(key)} refused: ${err.message}`,
        { cause: err },
      );
    }
    return DatasetErrors.DATASET_STORAGE_FAILED(
      `${method} ${this.describe(key)} failed: ${err.message}`,
      { cause: err },
    );
  }

  private statusFailure(method: HttpMethod, key: string, res: HttpResponse): TouchstoneError {
    const code = s3ErrorCode(res.body);
    const what = `${method} ${this.describe(key)} answered HTTP ${res.status}${code === undefined ? '' : ` ${code}`}`;
    if (res.status >= 500 || res.status === 429 || code === 'SlowDown') {
      return DatasetErrors.DATASET_STORAGE_FAILED(what, {
        ...(res.retryAfterSeconds === undefined
          ? {}
          : { retryAfterSeconds: res.retryAfterSeconds }),
      });
    }
    return DatasetErrors.DATASET_STORAGE_REFUSED(
      `${what}; check datasets.s3 (endpoint, region, credentials) and the bucket's policy`,
    );
  }

  async putObject(key: string, body: Uint8Array, contentType: string): Promise<void> {
    const res = await this.send('PUT', key, { body, contentType, maxResponseBytes: 64 * 1024 });
    if (res.status < 200 || res.status >= 300) throw this.statusFailure('PUT', key, res);
  }

  /** The object's bytes, or undefined when the key does not exist. */
  async getObject(key: string, maxBytes: number): Promise<Buffer | undefined> {
    const res = await this.send('GET', key, { maxResponseBytes: maxBytes });
    if (res.status === 404 && s3ErrorCode(res.body) !== 'NoSuchBucket') return undefined;
    if (res.status < 200 || res.status >= 300) throw this.statusFailure('GET', key, res);
    return res.body;
  }

  /** The object's size, or undefined when the key does not exist. */
  async headObject(key: string): Promise<{ size: number } | undefined> {
    const res = await this.send('HEAD', key, { maxResponseBytes: 64 * 1024 });
    if (res.status === 404) return undefined;
    if (res.status < 200 || res.status >= 300) throw this.statusFailure('HEAD', key, res);
    return { size: Number(res.headers['content-length'] ?? 0) };
  }

  /**
   * Keys under `prefix` (ListObjectsV2, following continuation tokens), at most `limit`, in key
   * order.
   */
  async listObjects(
    prefix: string,
    limit: number,
  ): Promise<{ key: string; bytes: number; modifiedAt: string }[]> {
    const out: { key: string; bytes: number; modifiedAt: string }[] = [];
    let token: string | undefined;
    do {
      const query: Record<string, string> = {
        'list-type': '2',
        prefix,
        'max-keys': String(Math.min(1000, limit - out.length)),
      };
      if (token !== undefined) query['continuation-token'] = token;
      const res = await this.send('GET', '', { query, maxResponseBytes: 8 * 1024 * 1024 });
      if (res.status < 200 || res.status >= 300) throw this.statusFailure('GET', prefix, res);
      const xml = res.body.toString('utf8');
      for (const [, block = ''] of xml.matchAll(/<Contents>([\s\S]*?)<\/Contents>/g)) {
        const key = xmlText(block, 'Key');
        if (key === undefined || out.length >= limit) continue;
        out.push({
          key,
          bytes: Number(xmlText(block, 'Size') ?? 0),
          modifiedAt: new Date(xmlText(block, 'LastModified') ?? 0).toISOString(),
        });
      }
      token =
        xmlText(xml, 'IsTruncated') === 'true' ? xmlText(xml, 'NextContinuationToken') : undefined;
    } while (token !== undefined && out.length < limit);
    return out;
  }

  async deleteObject(key: string): Promise<void> {
    const res = await this.send('DELETE', key, { maxResponseBytes: 64 * 1024 });
    if (res.status !== 404 && (res.status < 200 || res.status >= 300)) {
      throw this.statusFailure('DELETE', key, res);
    }
  }
}
