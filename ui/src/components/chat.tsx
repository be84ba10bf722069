import { parseJson } from '../format.js';
import type { Message, ToolCall } from '../types.js';
import { JsonView, ValueView } from './json-view.js';
import { Text } from './text.js';

/** A model call's messages as a chat: role, text, tool calls with their arguments. */

/** True for a list of chat messages (objects with a `role`). */
export function isMessages(value: unknown): value is Message[] {
  return (
    Array.isArray(value) &&
    value.length > 0 &&
    value.every(
      (m) => typeof m === 'object' && m !== null && typeof (m as Message).role === 'string',
    )
  );
}

/** Tool arguments are raw text: pretty JSON when they parse, else the text as it is. */
export function RawJson({ text, label }: { text: string; label: string }) {
  const parsed = parseJson(text);
  if (parsed === undefined) {
    return (
      <pre class="text-block">
        <Text value={text} />
      </pre>
    );
  }
  return <JsonView value={parsed} label={label} />;
}

function ToolCallView({ call }: { call: ToolCall }) {
  return (
    <div class="tool-call">
      <div>
        <span class="tag tool">tool call</span> <strong>{call.name}</strong>
        {call.id !== undefined && <span class="muted"> ({call.id})</span>}
      </div>
      {call.arguments !== '' && (
        <RawJson text={call.arguments} label={`arguments of ${call.name}`} />
      )}
    </div>
  );
}

function Content({ content }: { content: unknown }) {
  if (content === undefined || content === null || content === '') return null;
  if (typeof content === 'string') {
    return (
      <div class="message-text">
        <Text value={content} />
      </div>
    );
  }
  if (Array.isArray(content)) {
    return (
      <>
        {content.map((part, i) => {
          const text =
            (part as { text?: unknown; content?: unknown }).text ??
            (part as { content?: unknown }).content;
          return typeof text === 'string' ? (
            <div key={i} class="message-text">
              <Text value={text} />
            </div>
          ) : (
            <ValueView key={i} value={part} label="message part" />
          );
        })}
      </>
    );
  }
  return <ValueView value={content} label="message content" />;
}

export function Chat({ messages, label }: { messages: Message[]; label: string }) {
  return (
    <ol class="chat" aria-label={label}>
      {messages.map((m, i) => (
        <li key={i} class={`message role-${m.role.replace(/[^a-z]/g, '')}`}>
          <div class="role">
            {m.role}
            {m.name !== undefined && <span class="muted"> · {m.name}</span>}
            {m.toolCallId !== undefined && <span class="muted"> · result of {m.toolCallId}</span>}
          </div>
          <Content content={m.content} />
          {(m.toolCalls ?? []).map((c, j) => (
            <ToolCallView key={j} call={c} />
          ))}
        </li>
      ))}
    </ol>
  );
}

/** Messages as a chat, anything else as a value. */
export function MessagesOrValue({ value, label }: { value: unknown; label: string }) {
  return isMessages(value) ? (
    <Chat messages={value} label={label} />
  ) : (
    <ValueView value={value} label={label} />
  );
}
