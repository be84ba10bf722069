/** The roles an API key can hold, lowest first (auth/ maps them to permissions). */
export const ROLES = ['viewer', 'ingest', 'editor', 'admin', 'owner'] as const;
export type Role = (typeof ROLES)[number];
