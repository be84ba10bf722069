import {
  type Clock,
  isTouchstoneError,
  type TouchstoneError,
  withoutTrailingSlashes,
} from '../core/index.js';
import {
  awsSigner,
  type HttpClient,
  type HttpMethod,
  type HttpResponse,
  NetErrors,
} from '../net/index.js';
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

/** RFC 3986 encoding of one key segment, as S3's canonical URI wants it. */
function encodeSegment(segment: string): string {
  return encodeURIComponent(segment).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

const XML_ENTITIES: Readonly<Record<string, string>> = {
  '&amp;': '&',
  '&lt;': '<',
  '&gt;': '>',
  '&quot;': '"',
  '&apos;': "'",
};

/** The text of the first `<tag>` element in an S3 XML answer, entities decoded ('' if none). */
function xmlText(xml: string | undefined, tag: string): string {
  const m = new RegExp(`<${tag}>([^<]*)</${tag}>`).exec(xml ?? '');
  return (m?.[1] ?? '').replace(
    /&(amp|lt|gt|quot|apos|#\d{1,7}|#x[0-9a-fA-F]{1,6});/g,
    (e, ref: string) => (ref.startsWith('#') ? numericReference(e, ref) : (XML_ENTITIES[e] ?? e)),
  );
}

/** `&#233;` / `&#xE9;` (S3 escapes control characters in keys so); left as is when not a code point. */
function numericReference(entity: string, ref: string): string {
  const code = ref.startsWith('#x') ? Number.parseInt(ref.slice(2), 16) : Number(ref.slice(1));
  return code <= 0x10ffff ? String.fromCodePoint(code) : entity;
}

/** S3's error code from an XML error body (`<Code>AccessDenied</Code>`), when it is plain. */
function s3ErrorCode(body: Buffer): string | undefined {
  const m = /<Code>([A-Za-z0-9.]{1,64})<\/Code>/.exec(body.subarray(0, 4096).toString('utf8'));
  return m?.[1];
}

/**
 * The calls the dataset root needs (PutObject, GetObject, HeadObject, DeleteObject, ListObjectsV2),
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

  /** The object's URL, or the bucket's for the key `''` (listings). */
  private url(key: string): URL {
    const path = key.split('/').map(encodeSegment).join('/');
    const url = new URL(this.base.toString());
    const prefix = withoutTrailingSlashes(url.pathname);
    if (this.options.pathStyle) {
      const bucket = `${prefix}/${encodeSegment(this.options.bucket)}`;
      url.pathname = key === '' ? bucket : `${bucket}/${path}`;
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
    for (const [name, value] of Object.entries(query)) url.searchParams.set(name, value);
    const credentials = await this.options.credentials();
    const signer = await awsSigner({
      service: 's3',
      region: this.options.region,
      credentials,
      // S3 signs the path as sent (each segment encoded once).
      uriEscapePath: false,
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
    if (err.code === NetErrors.OUTBOUND_RESPONSE_TOO_LARGE.code) {
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
   * One ListObjectsV2 page: keys under `prefix` after `startAfter`, in key order, at most
   * `maxKeys` (≤ 1000).
   */
  async listObjects(
    prefix: string,
    startAfter: string | undefined,
    maxKeys: number,
  ): Promise<{
    objects: { key: string; bytes: number; modifiedAt: string }[];
    truncated: boolean;
  }> {
    const res = await this.send('GET', '', {
      maxResponseBytes: 4 * 1024 * 1024,
      query: {
        'list-type': '2',
        prefix,
        'max-keys': String(maxKeys),
        ...(startAfter === undefined ? {} : { 'start-after': startAfter }),
      },
    });
    if (res.status < 200 || res.status >= 300) throw this.statusFailure('GET', prefix, res);
    const xml = res.body.toString('utf8');
    const objects = [...xml.matchAll(/<Contents>([\s\S]*?)<\/Contents>/g)].map(([, entry]) => ({
      key: xmlText(entry, 'Key'),
      bytes: Number(xmlText(entry, 'Size')),
      modifiedAt: new Date(xmlText(entry, 'LastModified')).toISOString(),
    }));
    return { objects, truncated: xmlText(xml, 'IsTruncated') === 'true' };
  }

  async deleteObject(key: string): Promise<void> {
    const res = await this.send('DELETE', key, { maxResponseBytes: 64 * 1024 });
    if (res.status !== 404 && (res.status < 200 || res.status >= 300)) {
      throw this.statusFailure('DELETE', key, res);
    }
  }
}
