import { useTitle } from '../hooks.js';
import { href } from '../router.js';

/** A clear dead end: what was not found, and where to go instead. */
export function NotFound({
  what,
  project,
  detail,
}: {
  what: string;
  project: string;
  detail?: string;
}) {
  useTitle('Not found');
  return (
    <section class="not-found">
      <h1>Not found</h1>
      <p>
        There is no {what}
        {detail === undefined ? '' : ` (${detail})`}.
      </p>
      <p>
        <a href={href('/traces', { project })}>Back to the traces</a>
      </p>
    </section>
  );
}
