import type { Command } from 'commander';
import type { AppliedWebhook, DeliveryView, WebhookView } from '../webhooks/index.js';
import { EXIT } from './exit-codes.js';
import { CliExit, type CliIO, table } from './io.js';
import {
  callNamed,
  localScope,
  printResult,
  type ResourceFlags,
  resourceCommand,
  resourcePath,
} from './resources.js';
import { targetOptions } from './target.js';

type Flags = ResourceFlags;

const withWebhooks = localScope((kit) => kit.localWebhooks);

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
  resourceCommand<WebhookView, AppliedWebhook>(program, io, stdin, {
    noun: 'webhook',
    plural: 'webhooks',
    description: 'Manage webhooks: signed, retried callbacks for runs, scored traces and alerts.',
    scope: withWebhooks,
    apply: {
      description: 'Create or replace a webhook from a YAML or JSON file (- for stdin).',
      file: 'the Webhook resource',
      project: 'project, unless the file names one',
      dryRun: 'check the webhook without storing it',
      oneDocument: true,
      line: (applied, verb) => {
        const text = `${verb}: webhook ${applied.name} (project ${applied.project})`;
        return applied.secret === undefined
          ? text
          : `${text}\nsecret: ${applied.secret}\n` +
              'Store the secret now: it is not shown again. Receivers verify Touchstone-Signature with it.';
      },
    },
    list: {
      description: "List a project's webhooks (never their secrets).",
      headers: ['NAME', 'PROJECT', 'URL', 'EVENTS', 'STATE'],
      row: (w) => [
        w.name,
        w.project,
        w.url,
        w.events.length === 0 ? '(all but trace.scored)' : w.events.join(','),
        w.disabled ? 'disabled' : 'enabled',
      ],
    },
    get: { description: 'Show one webhook as JSON (never its secret).' },
    delete: {
      description: 'Delete a webhook; its queued deliveries fail.',
      line: (deleted) => `deleted webhook ${deleted.name} (project ${deleted.project})`,
    },
    verbs: (webhook) => {
      testVerb(webhook, io);
      deliveriesVerb(webhook, io);
    },
  });
}

/** `webhook test`: send a ping delivery and wait for its first attempt. */
function testVerb(webhook: Command, io: CliIO): void {
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
        (s, caller) =>
          s
            .deliveries(caller, flags.project, name, { pageSize: 50 })
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
}

/** `webhook deliveries`: a webhook's deliveries, newest first. */
function deliveriesVerb(webhook: Command, io: CliIO): void {
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
      (s, caller) =>
        s.deliveries(caller, flags.project, name, { pageSize: limit }).then((r) => r.items),
    );
    printResult(io, flags, items, deliveryRows(items));
  });
}
