import type { buildConnector } from 'undici';

/** Opens the socket for an origin; undici's connector shape (the seam the guard and proxy wrap). */
export type Connector = buildConnector.connector;
