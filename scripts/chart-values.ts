/**
 * The Helm chart's own values (deploy/helm/touchstone/values.yaml), as a schema: the chart's
 * values.schema.json is this plus `server.config`, the server's config schema (gen-k8s.ts). Every
 * key is documented in the chart's README (a test checks it).
 */
import { z } from 'zod';
import { CredentialGrantSchema } from '../src/config/schema.js';

/** A Kubernetes object the chart passes through as written (resources, affinity, env, …). */
const k8sObject = z.record(z.string(), z.unknown());
const k8sList = z.array(k8sObject);
const labels = z.record(z.string(), z.string());
const duration = z.string().regex(/^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$/, 'a duration such as 30s');
const secretName = z.string().regex(/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/, 'a Secret name');

const image = z.strictObject({
  repository: z.string().min(1),
  tag: z.string(),
  pullPolicy: z.enum(['Always', 'IfNotPresent', 'Never']),
});

const persistence = z.strictObject({
  enabled: z.boolean(),
  size: z.string().min(1),
  storageClass: z.string(),
  accessModes: z.array(z.string()).min(1),
  existingClaim: z.string(),
});

export const ChartValuesSchema = z.strictObject({
  image,
  imagePullSecrets: z.array(z.strictObject({ name: z.string().min(1) })),
  nameOverride: z.string(),
  fullnameOverride: z.string(),
  replicaCount: z.int().min(0),
  server: z.strictObject({
    port: z.int().min(1).max(65535),
    extraEnv: k8sList,
    extraEnvFrom: k8sList,
    resources: k8sObject,
    podSecurityContext: k8sObject,
    securityContext: k8sObject,
    podAnnotations: labels,
    podLabels: labels,
    nodeSelector: labels,
    tolerations: k8sList,
    affinity: k8sObject,
    topologySpreadConstraints: k8sList,
    terminationGracePeriodSeconds: z.int().min(0),
    service: z.strictObject({
      type: z.enum(['ClusterIP', 'NodePort', 'LoadBalancer']),
      port: z.int().min(1).max(65535),
      annotations: labels,
    }),
  }),
  persistence,
  postgresql: z.strictObject({
    external: z.strictObject({
      existingSecret: z.union([z.literal(''), secretName]),
      key: z.string().min(1),
    }),
    bundled: z.strictObject({
      enabled: z.boolean(),
      image,
      database: z.string().min(1),
      username: z.string().min(1),
      password: z.string(),
      existingSecret: z.union([z.literal(''), secretName]),
      persistence: persistence.omit({ existingClaim: true }),
      resources: k8sObject,
    }),
  }),
  serviceAccount: z.strictObject({
    create: z.boolean(),
    name: z.string(),
    annotations: labels,
  }),
  operator: z.strictObject({
    enabled: z.boolean(),
    replicaCount: z.int().min(0),
    apiKey: z.strictObject({
      secretName: z.union([z.literal(''), secretName]),
      key: z.string().min(1),
    }),
    watchNamespace: z.string(),
    resync: duration,
    statusInterval: duration,
    leaseDuration: duration,
    resources: k8sObject,
    nodeSelector: labels,
    tolerations: k8sList,
    affinity: k8sObject,
  }),
  admission: z.strictObject({
    enabled: z.boolean(),
    port: z.int().min(1024).max(65535),
    failurePolicy: z.enum(['Fail', 'Ignore']),
    // The API server allows 1 to 30; the webhook's own call gets 2 s less.
    timeoutSeconds: z.int().min(3).max(30),
    certDays: z.int().min(1),
    certManager: z.strictObject({
      enabled: z.boolean(),
      issuerRef: z.strictObject({
        name: z.string(),
        kind: z.enum(['Issuer', 'ClusterIssuer']),
      }),
    }),
  }),
  rbac: z.strictObject({ aggregateClusterRoles: z.boolean() }),
  sources: z.strictObject({
    allowHosts: z.array(z.string().min(1)),
    secrets: z.array(secretName),
    dir: z.string().regex(/^\/[^\s]*$/, 'an absolute path'),
  }),
  credentials: z.strictObject({ grants: z.array(CredentialGrantSchema) }),
  webhooks: z.strictObject({
    allowHosts: z.array(z.string().min(1)),
    maxAttempts: z.int().min(1).max(20).optional(),
    timeout: duration.optional(),
    retention: duration.optional(),
  }),
  serviceMonitor: z.strictObject({
    enabled: z.boolean(),
    interval: duration,
    scrapeTimeout: duration,
    labels,
    authorization: z.strictObject({
      secretName: z.union([z.literal(''), secretName]),
      key: z.string().min(1),
    }),
  }),
  prometheusRule: z.strictObject({
    enabled: z.boolean(),
    sourceLagSeconds: z.int().min(1),
    for: duration,
    severity: z.string().min(1),
    labels,
  }),
  networkPolicy: z.strictObject({
    egress: z.strictObject({ enabled: z.boolean(), extra: k8sList }),
  }),
});
