import type { Command } from 'commander';
import { pino } from 'pino';
import { OPEN_PRINCIPAL } from '../auth/index.js';
import { systemClock } from '../core/index.js';
import {
  type AppliedWebhook,
  createWebhooks,
  type DeliveryView,
  type WebhookService,
  type WebhookView,
} from '../webhooks/index.js';
import type { ApiClient } from './client.js';
import { EXIT } from './exit-codes.js';
import { CliExit, type CliIO, readResources, table } from './io.js';
import {
  applyQuery,
  callNamed,
  listResources,
  printResult,
  type ResourceFlags,
  resourcePath,
} from './resources.js';
import { configFromFlags } from './serve.js';
import { targetOptions, withTarget } from './target.js';

type Flags = ResourceFlags;

/** Runs against a server, or on the local data dir through the same service the server uses. */
function withWebhooks<T>(
  flags: Flags,
  io: CliIO,
  remote: (client: ApiClient) => Promise<T>,
  local: (service: WebhookService) => Promise<T>,
): Promise<T> {
  return withTarget(flags, io, remote, async (store) => {
    const webhooks = createWebhooks({
      config: configFromFlags(flags, io).webhooks,
      store,
      clock: systemClock,
      logger: pino({ level: 'silent' }),
    });
    try {
      return await local(webhooks.service);
    } finally {
      await webhooks.close();
    }
  });
}

function deliveryRows(items: DeliveryView[]): string {
  return table(
    ['ID', 'EVENT', 'STATE', 'ATTEMPTS', 'STATUS', 'RUN/TRACE', 'CREATED', 'LAST ERROR'],
    items.map((d) => [
      d.id,
      d.event,
      d.state,
      String(d.attempts),
      d.lastStatus === undefined ? '' : String(d.lastStatus),
      d.runId ?? (d.traceId === undefined ? '' : `${d.traceId} (${d.policy ?? ''})`),
      d.createdAt,
      d.lastError ?? '',
    ]),
  );
}

export function webhookCommand(program: Command, io: CliIO, stdin: () => string): void {
  const webhook = program
    .command('webhook')
    .description('Manage webhooks: signed, retried callbacks for runs, scored traces and alerts.');

  targetOptions(
    webhook
      .command('apply')
      .description('Create or replace a webhook from a YAML or JSON file (- for stdin).')
      .requiredOption('-f, --file <file>', 'the Webhook resource')
      .option('-p, --project <name>', 'project, unless the file names one')
      .option('--dry-run', 'check the webhook without storing it'),
  ).action(async (flags: Flags & { file: string; dryRun?: boolean }) => {
    const docs = readResources(flags.file, stdin);
    if (docs.length > 1) throw new CliExit(EXIT.USAGE, `${flags.file}: one webhook per file`);
    const resource = docs[0];
    const applied = await withWebhooks(
      flags,
      io,
      (c) => c.call<AppliedWebhook>('POST', `v1alpha1/webhooks?${applyQuery(flags)}`, resource),
      (s) =>
        s.apply(OPEN_PRINCIPAL, resource, {
          ...(flags.project === undefined ? {} : { project: flags.project }),
          validateOnly: flags.dryRun === true,
        }),
    );
    const verb = flags.dryRun ? 'valid' : 'applied';
    let text = `${verb}: webhook ${applied.name} (project ${applied.project})`;
    if (applied.secret !== undefined) {
      text +=
        `\nsecret: ${applied.secret}\n` +
        'Store the secret now: it is not shown again. Receivers verify Touchstone-Signature with it.';
    }
    printResult(io, flags, applied, text);
  });

  targetOptions(
    webhook
      .command('list')
      .description("List a project's webhooks (never their secrets).")
      .option('-p, --project <name>', 'project'),
  ).action(async (flags: Flags) => {
    await listResources<WebhookView>(
      withWebhooks,
      flags,
      io,
      'webhooks',
      ['NAME', 'PROJECT', 'URL', 'EVENTS', 'STATE'],
      (w) => [
        w.name,
        w.project,
        w.url,
        w.events.length === 0 ? '(all but trace.scored)' : w.events.join(','),
        w.disabled ? 'disabled' : 'enabled',
      ],
    );
  });

  targetOptions(
    webhook
      .command('get')
      .description('Show one webhook as JSON (never its secret).')
      .argument('<name>')
      .option('-p, --project <name>', 'project'),
  ).action(async (name: string, flags: Flags) => {
    const got = await callNamed(withWebhooks, flags, io, 'webhooks', name, 'get');
    io.stdout.write(`${JSON.stringify(got, null, 2)}\n`);
  });

  targetOptions(
    webhook
      .command('delete')
      .description('Delete a webhook; its queued deliveries fail.')
      .argument('<name>')
      .option('-p, --project <name>', 'project'),
  ).action(async (name: string, flags: Flags) => {
    const deleted = await callNamed(withWebhooks, flags, io, 'webhooks', name, 'delete');
    printResult(io, flags, deleted, `deleted webhook ${deleted.name} (project ${deleted.project})`);
  });

  targetOptions(
    webhook
      .command('test')
      .description('Send a ping delivery and wait for its first attempt.')
      .argument('<name>')
      .option('-p, --project <name>', 'project')
      .option('--wait <seconds>', 'how long to wait for the attempt (0: do not wait)', '15'),
  ).action(async (name: string, flags: Flags & { wait: string }) => {
    const wait = Number(flags.wait);
    if (!Number.isFinite(wait) || wait < 0) {
      throw new CliExit(EXIT.USAGE, '--wait: expected a number of seconds');
    }
    const find = (id: string) =>
      withWebhooks(
        flags,
        io,
        (c) =>
          c
            .call<{ deliveries: DeliveryView[] }>(
              'GET',
              resourcePath('webhooks', name, flags, '/deliveries', { page_size: '50' }),
            )
            .then((r) => r.deliveries.find((d) => d.id === id)),
        (s) =>
          s
            .deliveries(OPEN_PRINCIPAL, flags.project, name, { pageSize: 50 })
            .then((r) => r.items.find((d) => d.id === id)),
      );
    let delivery = await callNamed(withWebhooks, flags, io, 'webhooks', name, 'test');
    // The dispatcher (on whichever replica holds its lease) sends it; watch for the outcome.
    const deadline = Date.now() + wait * 1000;
    while (delivery.state === 'PENDING' && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 250));
      delivery = (await find(delivery.id)) ?? delivery;
    }
    const outcome =
      delivery.state === 'PENDING'
        ? 'queued (no server has sent it yet)'
        : delivery.state === 'DELIVERED'
          ? `delivered (HTTP ${delivery.lastStatus})`
          : `not delivered: ${delivery.lastError ?? 'unknown error'}`;
    printResult(io, flags, delivery, `ping ${delivery.id} to webhook ${name}: ${outcome}`);
    if (delivery.state === 'RETRYING' || delivery.state === 'FAILED') {
      throw new CliExit(EXIT.ERROR, `the test delivery was not accepted by the receiver`);
    }
  });

  targetOptions(
    webhook
      .command('deliveries')
      .description("List a webhook's deliveries, newest first.")
      .argument('<name>')
      .option('-p, --project <name>', 'project')
      .option('-n, --limit <n>', 'most deliveries to show', '50'),
  ).action(async (name: string, flags: Flags & { limit: string }) => {
    const limit = Number(flags.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
      throw new CliExit(EXIT.USAGE, '--limit: expected an integer from 1 to 1000');
    }
    const items = await withWebhooks(
      flags,
      io,
      (c) =>
        c
          .call<{ deliveries: DeliveryView[] }>(
            'GET',
            resourcePath('webhooks', name, flags, '/deliveries', { page_size: String(limit) }),
          )
          .then((r) => r.deliveries),
      (s) =>
        s.deliveries(OPEN_PRINCIPAL, flags.project, name, { pageSize: limit }).then((r) => r.items),
    );
    printResult(io, flags, items, deliveryRows(items));
  });
}
