import { useEffect, useState } from 'preact/hooks';
import {
  ApiError,
  type ConnectionState,
  forgetCredentials,
  forgetKey,
  onConnection,
  onUnauthenticated,
  type Session,
  saveKey,
  storedIdToken,
  storedKey,
  whoami,
} from './api.js';
import { ErrorNote, Loading } from './components/status.js';
import { useTitle } from './hooks.js';
import { DatasetPage, DatasetsPage } from './pages/datasets.js';
import { NotFound } from './pages/not-found.js';
import { PoliciesPage, PolicyPage } from './pages/policies.js';
import { RunPage, RunsPage } from './pages/runs.js';
import { ScoresPage } from './pages/scores.js';
import { SourcePage, SourcesPage } from './pages/sources.js';
import { TracePage } from './pages/trace.js';
import { TracesPage } from './pages/traces.js';
import { WebhookPage, WebhooksPage } from './pages/webhooks.js';
import { href, navigate, onLinkClick, useLocation } from './router.js';
import {
  completeSignIn,
  type SignInConfig,
  signInConfig,
  signInFailure,
  startSignIn,
} from './sign-in.js';

/** What every page gets: the project in view, the URL's query, who the key is. */
export interface PageProps {
  project: string;
  query: URLSearchParams;
  session: Session;
  /** The path's last part on detail pages (a trace id, a source name). */
  id: string;
}

const SECTIONS = [
  { path: '/traces', title: 'Traces', page: TracesPage, detail: TracePage },
  { path: '/scores', title: 'Scores', page: ScoresPage },
  { path: '/sources', title: 'Sources', page: SourcesPage, detail: SourcePage },
  { path: '/policies', title: 'Policies', page: PoliciesPage, detail: PolicyPage },
  { path: '/runs', title: 'Runs', page: RunsPage, detail: RunPage },
  { path: '/datasets', title: 'Datasets', page: DatasetsPage, detail: DatasetPage },
  { path: '/webhooks', title: 'Webhooks', page: WebhooksPage, detail: WebhookPage },
] as const;

function defaultProject(session: Session): string {
  if (session.project !== undefined) return session.project;
  return session.projects.includes('default') ? 'default' : (session.projects[0] ?? 'default');
}

function ConnectionBanner() {
  const [state, setState] = useState<ConnectionState>({ down: false, retryIn: 0 });
  useEffect(() => onConnection(setState), []);
  if (!state.down) return null;
  return (
    <div class="banner" role="status" aria-live="polite">
      The server is not answering; retrying in {state.retryIn} s. What is shown may be out of date.
    </div>
  );
}

function KeyPrompt({ reason, onSession }: { reason?: string; onSession(s: Session): void }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState<Error | undefined>(undefined);
  const [busy, setBusy] = useState(false);
  useTitle('API key');

  async function submit(event: Event): Promise<void> {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    saveKey(key.trim());
    try {
      onSession(await whoami());
    } catch (err) {
      forgetKey();
      setError(err as Error);
    } finally {
      setBusy(false);
    }
  }

  return (
    <main id="content" class="key-prompt">
      <h1>Enter an API key</h1>
      {reason !== undefined && (
        <p class="error-note" role="alert">
          {reason}
        </p>
      )}
      <p>
        This server needs an API key to read its data. The key stays in this browser tab only
        (session storage, gone when the tab closes) and is sent to this server as a bearer token; it
        is never put in a URL.
      </p>
      <form onSubmit={submit}>
        <label for="api-key">API key</label>
        <input
          id="api-key"
          type="password"
          autocomplete="off"
          spellcheck={false}
          required
          value={key}
          onInput={(e) => setKey((e.currentTarget as HTMLInputElement).value)}
        />
        <button type="submit" disabled={busy || key.trim() === ''}>
          Use this key
        </button>
      </form>
      {error !== undefined && <ErrorNote error={error} what="the key" />}
    </main>
  );
}

/** The sign-in page of a server whose people sign in at an identity provider. */
function SignInPage({ config, reason }: { config: SignInConfig; reason?: string }) {
  const [busy, setBusy] = useState(false);
  const [failure, setFailure] = useState<string | undefined>(undefined);
  const host = new URL(config.issuer).host;
  useTitle('Sign in');

  async function signIn(): Promise<void> {
    setBusy(true);
    try {
      await startSignIn(config);
    } catch (err) {
      setFailure((err as Error).message);
      setBusy(false);
    }
  }

  return (
    <main id="content" class="key-prompt">
      <h1>Sign in</h1>
      {reason !== undefined && (
        <p class="error-note" role="alert">
          {reason}
        </p>
      )}
      <p>
        This server signs people in at their identity provider, {host}. You come back here once
        signed in. The sign-in stays in this browser tab only (session storage, gone when the tab
        closes) and lasts until its token expires; then you sign in again.
      </p>
      <button type="button" disabled={busy} onClick={signIn}>
        Sign in with {host}
      </button>
      {failure !== undefined && (
        <p class="error-note" role="alert">
          {failure}
        </p>
      )}
    </main>
  );
}

/**
 * What a tab without a working credential sees: the provider's sign-in page when the server has
 * one (`/ui/login/config`), else the key prompt.
 */
function SignInGate({ reason, onSession }: { reason?: string; onSession(s: Session): void }) {
  const [config, setConfig] = useState<SignInConfig | null | undefined>(undefined);
  const [failure, setFailure] = useState<Error | undefined>(undefined);
  const [attempt, setAttempt] = useState(0);
  useEffect(() => {
    setFailure(undefined);
    signInConfig().then(setConfig, setFailure);
  }, [attempt]);

  const why = reason === undefined ? {} : { reason };
  if (failure !== undefined) {
    return (
      <main id="content" class="key-prompt">
        <h1>Sign in</h1>
        <ErrorNote error={failure} what="the sign-in" />
        <button type="button" onClick={() => setAttempt(attempt + 1)}>
          Try again
        </button>
      </main>
    );
  }
  if (config === undefined) {
    return (
      <main id="content">
        <Loading what="the sign-in" />
      </main>
    );
  }
  return config === null ? (
    <KeyPrompt {...why} onSession={onSession} />
  ) : (
    <SignInPage config={config} {...why} />
  );
}

/** Who the header says is signed in. */
function identity(session: Session): string {
  if (session.kind === 'open') return 'no auth (loopback)';
  const who =
    session.kind === 'oidc'
      ? (session.email ?? session.subject ?? '')
      : `key ${session.keyId ?? ''}`;
  return `${who} · ${session.roles.join(', ')}`;
}

function Header({
  session,
  project,
  section,
}: {
  session: Session;
  project: string;
  section: string;
}) {
  const canChoose = session.project === undefined;
  return (
    <header class="top">
      <a class="brand" href={href('/traces', { project })}>
        Touchstone
      </a>
      <nav aria-label="Sections">
        <ul>
          {SECTIONS.map((s) => (
            <li key={s.path}>
              <a
                href={href(s.path, { project })}
                aria-current={section === s.path ? 'page' : undefined}
              >
                {s.title}
              </a>
            </li>
          ))}
        </ul>
      </nav>
      <div class="who">
        <label for="project">Project</label>
        {canChoose ? (
          <select
            id="project"
            value={project}
            onChange={(e) =>
              navigate(
                href(section === '' ? '/traces' : section, {
                  project: (e.currentTarget as HTMLSelectElement).value,
                }),
              )
            }
          >
            {[...new Set([project, ...session.projects])].sort().map((p) => (
              <option key={p} value={p}>
                {p}
              </option>
            ))}
          </select>
        ) : (
          <output id="project">{project}</output>
        )}
        <span class="muted">{identity(session)}</span>
        {session.kind === 'key' && (
          <button
            type="button"
            class="link-button"
            onClick={() => {
              forgetKey();
              window.location.reload();
            }}
          >
            Forget key
          </button>
        )}
        {session.kind === 'oidc' && (
          <button
            type="button"
            class="link-button"
            onClick={() => {
              forgetCredentials();
              window.location.reload();
            }}
          >
            Sign out
          </button>
        )}
      </div>
    </header>
  );
}

function Routes({ session }: { session: Session }) {
  const { path, query } = useLocation();
  const project = query.get('project') ?? defaultProject(session);
  const parts = path.split('/').filter((p) => p !== '');
  const section = SECTIONS.find((s) => s.path === `/${parts[0] ?? ''}`);

  useEffect(() => {
    if (parts.length === 0) navigate(href('/traces', { project }), true);
  }, [parts.length, project]);

  let body: preact.JSX.Element;
  if (parts.length === 0) body = <Loading what="the traces" />;
  else if (
    section === undefined ||
    parts.length > 2 ||
    (parts.length === 2 && !('detail' in section))
  ) {
    body = <NotFound what={`page ${path}`} project={project} />;
  } else {
    const props: PageProps = { project, query, session, id: decodeURIComponent(parts[1] ?? '') };
    const Page = parts.length === 2 && 'detail' in section ? section.detail : section.page;
    // A new key (project, id) gives a page fresh state.
    body = <Page key={`${project}/${parts[1] ?? ''}`} {...props} />;
  }
  return (
    <>
      <Header session={session} project={project} section={section?.path ?? ''} />
      <ConnectionBanner />
      <main id="content">{body}</main>
    </>
  );
}

/** Longest a timer may wait (setTimeout's limit, about 24.8 days). */
const MAX_TIMER_MS = 2 ** 31 - 1;
const EXPIRED = 'Your sign-in has expired. Sign in again.';

/** The ID token's expiry: the tab goes back to the sign-in page then (there is no refresh). */
function useSignInExpiry(session: Session | null | undefined, expire: () => void): void {
  useEffect(() => {
    if (session?.kind !== 'oidc') return;
    const token = storedIdToken();
    if (token === null) return;
    const timer = setTimeout(
      expire,
      Math.min(MAX_TIMER_MS, Math.max(0, token.expiresAt - Date.now())),
    );
    return () => clearTimeout(timer);
  }, [session]);
}

export function App() {
  const [session, setSession] = useState<Session | null | undefined>(undefined);
  const [reason, setReason] = useState<string | undefined>(undefined);
  const [failure, setFailure] = useState<Error | undefined>(undefined);

  const signedOut = (why: string | undefined) => {
    forgetCredentials();
    setReason(why);
    setSession(null);
  };
  useSignInExpiry(session, () => signedOut(EXPIRED));

  useEffect(() => {
    document.addEventListener('click', onLinkClick);
    const stop = onUnauthenticated((message) => {
      if (storedKey() !== null) {
        signedOut(`The server no longer accepts the key (${message}). Enter a key.`);
      } else if (storedIdToken() !== null) {
        signedOut(`The server no longer accepts your sign-in (${message}). Sign in again.`);
      } else signedOut(undefined);
    });
    start().catch((err: unknown) => {
      const { message, requestId } = signInFailure(err);
      signedOut(
        `Sign-in failed: ${message}${requestId === undefined ? '' : ` (request ${requestId})`}`,
      );
    });
    return () => {
      document.removeEventListener('click', onLinkClick);
      stop();
    };
  }, []);

  /** Completes a sign-in the provider sent back, then asks who the tab's credential is. */
  async function start(): Promise<void> {
    await completeSignIn();
    const token = storedIdToken();
    if (storedKey() === null && token !== null && token.expiresAt <= Date.now()) {
      signedOut(EXPIRED);
      return;
    }
    whoami().then(setSession, (err: unknown) => {
      if (err instanceof ApiError && err.status === 401) return;
      setFailure(err as Error);
    });
  }

  return (
    <>
      <a class="skip" href="#content">
        Skip to content
      </a>
      {session === undefined ? (
        <>
          <ConnectionBanner />
          <main id="content">
            {failure === undefined ? (
              <Loading what="the session" />
            ) : (
              <ErrorNote error={failure} what="the session" />
            )}
          </main>
        </>
      ) : session === null ? (
        <>
          <ConnectionBanner />
          <SignInGate
            {...(reason === undefined ? {} : { reason })}
            onSession={(s) => {
              setReason(undefined);
              setSession(s);
            }}
          />
        </>
      ) : (
        <Routes session={session} />
      )}
    </>
  );
}
