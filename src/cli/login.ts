import { type Command, Option } from 'commander';
import { ApiCallError, ApiClient } from './client.js';
import { credentialsPath, removeSignIn, saveSignIn, storedSignIn } from './credentials-file.js';
import { EXIT } from './exit-codes.js';
import { CliExit, type CliIO } from './io.js';
import type { Flow, SignedInIdentity } from './sign-in.js';
import { namedServerUrl, remoteOrLocal, type TargetFlags, targetOptions } from './target.js';

/** What `GET /v1alpha1/whoami` answers (the fields shown). */
interface Whoami {
  kind: string;
  keyId?: string;
  subject?: string;
  email?: string;
  project?: string;
  roles: string[];
}

/** A sign-in belongs to one server: login and logout need one named. */
function serverOf(flags: { server?: string }, io: CliIO, command: string): string {
  const url = namedServerUrl(flags, io);
  if (url === undefined) {
    throw new CliExit(
      EXIT.USAGE,
      `touchstone ${command} needs a server: --server URL or TOUCHSTONE_SERVER (a local data dir needs no sign-in)`,
    );
  }
  return url;
}

function describeIdentity(who: Whoami): string {
  switch (who.kind) {
    case 'oidc':
      return `${who.subject ?? '?'}${who.email === undefined ? '' : ` (${who.email})`}`;
    case 'key':
      return `API key ${who.keyId ?? '?'}`;
    default:
      return 'anonymous (the server runs without authentication)';
  }
}

function describeAccess(who: Whoami): string {
  const project = who.project === undefined ? 'every project' : `project ${who.project}`;
  return `${project}, roles ${who.roles.join(', ') || 'none'}`;
}

/**
 * Asks the server who the new token makes the caller, so a login the server would refuse (an
 * issuer or audience it does not list, no mapping) fails now rather than on the next command.
 */
async function checkWithServer(
  server: string,
  issuer: string,
  clientId: string,
  identity: SignedInIdentity,
): Promise<Whoami> {
  const client = new ApiClient(server, { token: identity.idToken });
  try {
    return await client.call<Whoami>('GET', '/v1alpha1/whoami');
  } catch (err) {
    if (!(err instanceof ApiCallError) || (err.status !== 401 && err.status !== 403)) throw err;
    throw new CliExit(
      EXIT.ERROR,
      `signed in at ${issuer}, but ${server} refuses the token (nothing was stored): ${err.message.split('\n')[0]}\n` +
        `Its auth.oidc must list the issuer ${issuer} with the audience ${clientId} and a mapping for you.`,
    );
  }
}

export function loginCommand(program: Command, io: CliIO): void {
  program
    .command('login')
    .description(
      "Sign in at the team's identity provider (OIDC); later commands send the ID token to this server.",
    )
    .option(
      '--server <url>',
      'server URL or HOST:PORT the sign-in is for (default: $TOUCHSTONE_SERVER)',
    )
    .option(
      '--issuer <url>',
      "the provider's issuer URL (default: the last one used for this server)",
    )
    .option(
      '--client-id <id>',
      'the OAuth client ID registered for the CLI (default: the last one used)',
    )
    .option(
      '--scope <scopes>',
      'scopes asked for (space-separated; must include openid)',
      'openid email profile',
    )
    .addOption(
      new Option(
        '--flow <flow>',
        'device code, or the browser with a loopback redirect (default: device when offered)',
      ).choices(['device', 'browser']),
    )
    .option('--no-browser', 'do not open a browser (the URL is printed either way)')
    .action(
      async (flags: {
        server?: string;
        issuer?: string;
        clientId?: string;
        scope: string;
        flow?: Flow;
        browser: boolean;
      }) => {
        const server = serverOf(flags, io, 'login');
        const path = credentialsPath(io.env);
        const previous =
          flags.issuer === undefined || flags.clientId === undefined
            ? storedSignIn(path, server)
            : undefined;
        const rawIssuer = flags.issuer ?? previous?.issuer;
        const clientId = flags.clientId ?? previous?.client_id;
        if (rawIssuer === undefined || clientId === undefined) {
          throw new CliExit(
            EXIT.USAGE,
            `touchstone login needs --issuer URL and --client-id ID the first time for ${server} (ask whoever runs it)`,
          );
        }
        // Signing in loads the HTTP and token code; other commands do not need it.
        const { issuerUrl, scopeOf } = await import('./sign-in.js');
        const { signIn } = await import('./sign-in-flows.js');
        const issuer = issuerUrl(rawIssuer);
        const identity = await signIn({
          issuer,
          clientId,
          scope: scopeOf(flags.scope),
          flow: flags.flow,
          openBrowser: flags.browser,
          env: io.env,
          stderr: io.stderr,
        });
        const who = await checkWithServer(server, issuer, clientId, identity);
        saveSignIn(path, server, {
          issuer,
          client_id: clientId,
          id_token: identity.idToken,
          expires_at: identity.expiresAt.toISOString(),
          subject: identity.subject,
          ...(identity.email === undefined ? {} : { email: identity.email }),
        });
        io.stdout.write(
          `signed in to ${server} as ${describeIdentity(who)}: ${describeAccess(who)}; until ${identity.expiresAt.toISOString()}\n`,
        );
        if (io.env.TOUCHSTONE_API_KEY) {
          io.stderr.write(
            'touchstone: TOUCHSTONE_API_KEY is set and is sent instead of this sign-in\n',
          );
        }
      },
    );

  program
    .command('logout')
    .description("Forget this server's sign-in (touchstone login).")
    .option('--server <url>', 'server URL or HOST:PORT (default: $TOUCHSTONE_SERVER)')
    .action((flags: { server?: string }) => {
      const server = serverOf(flags, io, 'logout');
      const path = credentialsPath(io.env);
      io.stdout.write(
        removeSignIn(path, server)
          ? `signed out of ${server}: its sign-in is removed from ${path}\n`
          : `not signed in to ${server}; nothing to remove\n`,
      );
    });

  targetOptions(
    program
      .command('whoami')
      .description('Show who commands act as on the server: project and roles.'),
  ).action((flags: TargetFlags) =>
    remoteOrLocal(
      flags,
      io,
      async (client) => {
        const who = await client.call<Whoami>('GET', '/v1alpha1/whoami');
        if (flags.json) {
          io.stdout.write(`${JSON.stringify(who, null, 2)}\n`);
          return;
        }
        const signIn = client.bearer?.signIn;
        const via =
          who.kind === 'oidc' && signIn !== undefined
            ? `, signed in at ${signIn.issuer} until ${signIn.expiresAt.toISOString()}`
            : '';
        io.stdout.write(
          `${describeIdentity(who)}${via}\n${describeAccess(who)} on ${client.baseUrl}\n`,
        );
      },
      async () => {
        io.stdout.write(
          flags.json
            ? `${JSON.stringify({ kind: 'local', roles: ['owner'] }, null, 2)}\n`
            : 'local data dir: commands act as the owner of every project\n',
        );
      },
    ),
  );
}
