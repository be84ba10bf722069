import { useRef, useState } from 'preact/hooks';
import { ApiError, apiPost } from '../api.js';
import type { Result } from '../types.js';
import { Field } from './field.js';

/**
 * The UI's one write: a person's score on a trace (`POST /v1alpha1/traces/{id}/annotations`),
 * a number from 0 to 1, pass or fail, or a label, with an optional comment, under a name.
 * Annotating a name again replaces one's own score of that name. The same payload sent again
 * (a retry after an error) carries the same Idempotency-Key, so it is stored once.
 */

type Kind = 'value' | 'passed' | 'label';

/** The server's bounds (docs/api.md); the server checks them again. */
const NAME_PATTERN = '[A-Za-z0-9][A-Za-z0-9_.\\-]{0,63}';
const MAX_LABEL = 256;
const MAX_COMMENT = 4096;

function newKey(): string {
  return crypto.randomUUID();
}

export function AnnotateForm({
  project,
  traceId,
  onSaved,
}: {
  project: string;
  traceId: string;
  onSaved: () => void;
}) {
  const [name, setName] = useState('');
  const [kind, setKind] = useState<Kind>('value');
  const [value, setValue] = useState('');
  const [passed, setPassed] = useState('true');
  const [label, setLabel] = useState('');
  const [comment, setComment] = useState('');
  const [busy, setBusy] = useState(false);
  const [status, setStatus] = useState<{ ok: boolean; text: string } | undefined>(undefined);
  const sent = useRef<{ payload: string; key: string }>({ payload: '', key: '' });

  const submit = async (event: Event) => {
    event.preventDefault();
    const body: Record<string, unknown> = { name: name.trim() };
    if (kind === 'value') body.value = Number(value);
    if (kind === 'passed') body.passed = passed === 'true';
    if (kind === 'label') body.label = label;
    if (comment.trim() !== '') body.comment = comment;
    const payload = JSON.stringify(body);
    if (sent.current.payload !== payload) sent.current = { payload, key: newKey() };
    setBusy(true);
    setStatus(undefined);
    try {
      const saved = await apiPost<{ result: Result }>(
        `/v1alpha1/traces/${encodeURIComponent(traceId)}/annotations`,
        { project },
        body,
        sent.current.key,
      );
      setStatus({ ok: true, text: `Saved ${saved.result.evaluator}.` });
      // The next save is a new annotation, even with the same payload.
      sent.current = { payload: '', key: '' };
      onSaved();
    } catch (err) {
      const message = err instanceof ApiError ? err.message : 'the server could not be reached';
      setStatus({ ok: false, text: `Not saved: ${message}` });
    } finally {
      setBusy(false);
    }
  };

  return (
    <section aria-labelledby="annotate-h">
      <h2 id="annotate-h">Annotate</h2>
      <form class="annotate" onSubmit={submit} aria-label="Annotate this trace">
        <Field id="annotation-name" label="Name">
          <input
            id="annotation-name"
            required
            pattern={NAME_PATTERN}
            maxLength={64}
            title="1–64 letters, digits, _ . - starting with a letter or digit"
            value={name}
            onInput={(e) => setName(e.currentTarget.value)}
          />
        </Field>
        <fieldset class="kind">
          <legend>Score</legend>
          {(
            [
              ['value', 'Number 0–1'],
              ['passed', 'Pass or fail'],
              ['label', 'Label'],
            ] as const
          ).map(([k, text]) => (
            <label key={k}>
              <input
                type="radio"
                name="annotation-kind"
                value={k}
                checked={kind === k}
                onChange={() => setKind(k)}
              />{' '}
              {text}
            </label>
          ))}
        </fieldset>
        {kind === 'value' && (
          <Field id="annotation-value" label="Value (0–1)">
            <input
              id="annotation-value"
              type="number"
              required
              min={0}
              max={1}
              step="any"
              value={value}
              onInput={(e) => setValue(e.currentTarget.value)}
            />
          </Field>
        )}
        {kind === 'passed' && (
          <Field id="annotation-passed" label="Verdict">
            <select
              id="annotation-passed"
              value={passed}
              onChange={(e) => setPassed(e.currentTarget.value)}
            >
              <option value="true">pass</option>
              <option value="false">fail</option>
            </select>
          </Field>
        )}
        {kind === 'label' && (
          <Field id="annotation-label" label="Label">
            <input
              id="annotation-label"
              required
              maxLength={MAX_LABEL}
              value={label}
              onInput={(e) => setLabel(e.currentTarget.value)}
            />
          </Field>
        )}
        <Field id="annotation-comment" label="Comment (optional)" wide>
          <textarea
            id="annotation-comment"
            rows={3}
            maxLength={MAX_COMMENT}
            value={comment}
            onInput={(e) => setComment(e.currentTarget.value)}
          />
        </Field>
        <div class="actions">
          <button type="submit" disabled={busy}>
            Save annotation
          </button>
          <span role="status" class={status?.ok === false ? 'bad' : 'muted'}>
            {status?.text ?? ''}
          </span>
        </div>
      </form>
    </section>
  );
}
