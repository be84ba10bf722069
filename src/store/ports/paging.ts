/** Storage port: paging shared by every list port. The conventions are in ../ports.ts. */

export interface PageRequest {
  /** 1..1000; larger values are clamped to 1000. */
  pageSize: number;
  /** Opaque token from a previous page's `nextPageToken`. */
  pageToken?: string;
}

export interface Page<T> {
  items: T[];
  /** Present when more items may follow. */
  nextPageToken?: string;
}
