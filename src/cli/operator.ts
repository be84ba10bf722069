import { hostname } from 'node:os';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Command } from 'commander';
import { parseDuration, splitListen } from '../config/index.js';
import type { RunningAdmission } from '../operator/index.js';
import { EXIT } from './exit-codes.js';
import { CliExit, type CliIO } from './io.js';

interface OperatorFlags {
  server?: string;
  namespace: string;
  kubeconfig?: string;
  leaseNamespace?: string;
  leaseName: string;
  leaseDuration: string;
  resync: string;
  statusInterval: string;
  timeout: string;
  admissionListen?: string;
  tlsCertFile?: string;
  tlsKeyFile?: string;
  admissionFailurePolicy: string;
  admissionTimeout: string;
}

function duration(flag: string, text: string): number {
  const ms = parseDuration(text);
  if (ms === undefined || ms <= 0) {
    throw new CliExit(EXIT.USAGE, `--${flag}: not a duration such as 30s or 5m`);
  }
  return ms;
}

/**
 * The cluster to talk to: --kubeconfig or KUBECONFIG, else the pod's service account. The
 * Kubernetes client is loaded here, not with the CLI: it takes over a second to import.
 */
async function kubeConfig(flags: OperatorFlags, io: CliIO): Promise<KubeConfig> {
  const { KubeConfig } = await import('@kubernetes/client-node');
  const kc = new KubeConfig();
  const file = flags.kubeconfig ?? io.env.KUBECONFIG;
  try {
    if (file !== undefined && file !== '') kc.loadFromFile(file);
    else kc.loadFromCluster();
  } catch (err) {
    throw new CliExit(EXIT.USAGE, `cannot load the Kubernetes config: ${(err as Error).message}`);
  }
  return kc;
}

/** The admission webhook's flags, checked before anything starts; undefined when it is off. */
function admissionFlags(flags: OperatorFlags) {
  if (flags.admissionListen === undefined) return undefined;
  const { host, port } = splitListen(flags.admissionListen);
  if (!flags.admissionListen.includes(':') || !Number.isInteger(port) || port < 1 || port > 65535) {
    throw new CliExit(EXIT.USAGE, '--admission-listen: not HOST:PORT such as :8443');
  }
  if (flags.tlsCertFile === undefined || flags.tlsKeyFile === undefined) {
    throw new CliExit(
      EXIT.USAGE,
      '--admission-listen needs --tls-cert-file and --tls-key-file: the Kubernetes API server calls webhooks over HTTPS only',
    );
  }
  const policy = flags.admissionFailurePolicy;
  if (policy !== 'Fail' && policy !== 'Ignore') {
    throw new CliExit(EXIT.USAGE, '--admission-failure-policy: Fail or Ignore');
  }
  return {
    host,
    port,
    certFile: flags.tlsCertFile,
    keyFile: flags.tlsKeyFile,
    failurePolicy: policy as 'Fail' | 'Ignore',
    timeoutMs: duration('admission-timeout', flags.admissionTimeout),
  } as const;
}

function jsonLog(io: CliIO) {
  const line =
    (level: string) =>
    (msg: string, fields: Record<string, unknown> = {}) => {
      io.stderr.write(
        `${JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields })}\n`,
      );
    };
  return { info: line('info'), warn: line('warn') };
}

/** `touchstone operator`: runs the Kubernetes operator until SIGTERM. */
export function operatorCommand(program: Command, io: CliIO, done: (code: number) => void): void {
  program
    .command('operator')
    .description(
      'Run the Kubernetes operator: apply TraceSource, OnlineEvalPolicy, EvalRun and Webhook custom resources to a Touchstone server and mirror their status (docs/kubernetes.md).',
    )
    .option('--server <url>', 'the Touchstone server (default $TOUCHSTONE_SERVER)')
    .option('--namespace <name>', 'watch only this namespace (default: all)', '')
    .option('--kubeconfig <file>', 'kubeconfig file (default $KUBECONFIG, else in-cluster)')
    .option('--lease-namespace <name>', 'namespace of the leader Lease (default $POD_NAMESPACE)')
    .option('--lease-name <name>', 'name of the leader Lease', 'touchstone-operator')
    .option('--lease-duration <duration>', 'how long a leader holds the Lease unrenewed', '15s')
    .option('--resync <duration>', 'reconcile every resource again this often', '5m')
    .option('--status-interval <duration>', 'how often source and run status is read', '30s')
    .option('--timeout <duration>', 'timeout of each call to the server', '30s')
    .option(
      '--admission-listen <host:port>',
      'serve the validating admission webhook (POST /validate, HTTPS) here, e.g. :8443',
    )
    .option(
      '--tls-cert-file <file>',
      "the admission webhook's certificate (PEM; reloaded when it changes)",
    )
    .option('--tls-key-file <file>', "the admission webhook's private key (PEM)")
    .option(
      '--admission-failure-policy <policy>',
      'when the server cannot answer: Fail refuses the change, Ignore admits it with a warning',
      'Fail',
    )
    .option(
      '--admission-timeout <duration>',
      "timeout of the webhook's call to the server (below the webhook's timeoutSeconds)",
      '8s',
    )
    .action(async (flags: OperatorFlags) => {
      const url = flags.server ?? io.env.TOUCHSTONE_SERVER;
      if (url === undefined || url === '') {
        throw new CliExit(
          EXIT.USAGE,
          'give the Touchstone server: --server URL or TOUCHSTONE_SERVER',
        );
      }
      const leaseNamespace = flags.leaseNamespace ?? io.env.POD_NAMESPACE ?? 'default';
      const admission = admissionFlags(flags);
      const log = jsonLog(io);
      const kc = await kubeConfig(flags, io);
      const { startOperator, startAdmission, TouchstoneClient } = await import(
        '../operator/index.js'
      );
      let webhook: RunningAdmission | undefined;
      if (admission !== undefined) {
        try {
          webhook = await startAdmission({
            ...admission,
            server: new TouchstoneClient(url, io.env.TOUCHSTONE_API_KEY, admission.timeoutMs),
            reloadIntervalMs: 10_000,
            log,
          });
        } catch (err) {
          throw new CliExit(
            EXIT.USAGE,
            `cannot serve the admission webhook: ${(err as Error).message}`,
          );
        }
        log.info('admission webhook listening', {
          listen: `${admission.host}:${webhook.port}`,
          failurePolicy: admission.failurePolicy,
        });
      }
      const operator = startOperator({
        kubeConfig: kc,
        namespace: flags.namespace,
        server: {
          url,
          apiKey: io.env.TOUCHSTONE_API_KEY,
          timeoutMs: duration('timeout', flags.timeout),
        },
        lease: {
          namespace: leaseNamespace,
          name: flags.leaseName,
          identity: io.env.POD_NAME ?? `${hostname()}-${process.pid}`,
          durationMs: duration('lease-duration', flags.leaseDuration),
        },
        timing: {
          resyncMs: duration('resync', flags.resync),
          statusIntervalMs: duration('status-interval', flags.statusInterval),
          backoffBaseMs: 1000,
          backoffMaxMs: 5 * 60_000,
        },
        log,
      });
      log.info('operator started', { server: url, namespace: flags.namespace || '(all)' });
      io.onShutdownSignal(async (signal) => {
        log.info('shutting down', { signal });
        await webhook?.stop();
        await operator.stop();
        done(EXIT.OK);
      });
    });
}
