import type { RequestSigner } from '../json-rest.js';

/**
 * How an MLflow request is authorized: a bearer token (open-source servers, Databricks), or a
 * signature over the exact request (SageMaker). A credential that can be renewed (a service
 * principal's exchanged token) gets one more try after a 401.
 */
export interface MlflowAuth {
  sign: RequestSigner;
  /**
   * After a 401 to a request sent with `sent` headers: obtains a fresh credential unless one was
   * obtained since; true when the request is worth sending once more.
   */
  renew?(sent: Readonly<Record<string, string>>, signal?: AbortSignal): Promise<boolean>;
}

/** A bearer token read for every request (so a rotated credential is picked up). */
export function bearerAuth(token: () => string | undefined): MlflowAuth {
  return {
    sign: async (request) => {
      const value = token();
      return {
        headers:
          value === undefined || value === ''
            ? request.headers
            : { ...request.headers, authorization: `Bearer ${value}` },
      };
    },
  };
}
