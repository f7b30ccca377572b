/**
 * The message board (spec 000's Message example): post (`createMessage`), edit (`updateMessage`), open one
 * by id (`getMessage`). The schema has no list of messages, so the board shows the messages this browser
 * posted or opened (their ids are kept in localStorage and re-read with `getMessage`) and every message
 * created or changed anywhere while the page is open (`messageChanged` subscription).
 */
import { type FormEvent, useEffect, useReducer, useState } from 'react';
import { useClient, useMutation, useSubscription } from 'urql';
import { ErrorNotice } from './ErrorNotice.tsx';
import {
  CreateMessageMutation,
  errorText,
  GetMessageQuery,
  type Message,
  MessageChangedSubscription,
  UpdateMessageMutation,
} from './graphql.ts';

const IDS_KEY = 'creatures.messageIds';
const AUTHOR_KEY = 'creatures.author';
/** Most messages kept on the board (and ids remembered). */
const MAX_MESSAGES = 100;

function storedIds(): string[] {
  try {
    const ids: unknown = JSON.parse(localStorage.getItem(IDS_KEY) ?? '[]');
    return Array.isArray(ids) ? ids.filter((id): id is string => typeof id === 'string') : [];
  } catch {
    return [];
  }
}

/** Newest first; an upserted message moves to the top only when it is new. */
function upsert(messages: Message[], message: Message): Message[] {
  const index = messages.findIndex((m) => m.id === message.id);
  if (index < 0) return [message, ...messages].slice(0, MAX_MESSAGES);
  const next = messages.slice();
  next[index] = message;
  return next;
}

/** The board. */
export function MessageBoard() {
  const client = useClient();
  const [messages, put] = useReducer(upsert, []);
  const [loadError, setLoadError] = useState<string | null>(null);
  const [changes] = useSubscription({ query: MessageChangedSubscription });

  useEffect(() => {
    const message = changes.data?.messageChanged.message;
    if (message) put(message);
  }, [changes.data]);

  // The remembered ids are read once, before anything is saved, and saved again only once they are loaded.
  const [remembered] = useState(storedIds);
  const [loaded, setLoaded] = useState(remembered.length === 0);

  useEffect(() => {
    if (loaded) localStorage.setItem(IDS_KEY, JSON.stringify(messages.map((m) => m.id)));
  }, [loaded, messages]);

  useEffect(() => {
    let cancelled = false;
    (async () => {
      for (const id of [...remembered].reverse()) {
        const result = await client.query(GetMessageQuery, { id }).toPromise();
        if (cancelled) return;
        if (result.error) setLoadError(errorText(result.error));
        else if (result.data?.getMessage) put(result.data.getMessage);
      }
      setLoaded(true);
    })();
    return () => {
      cancelled = true;
    };
  }, [client, remembered]);

  return (
    <div className="messages">
      <h2 id="messages-title" className="column-title">
        Messages
      </h2>
      <PostMessage onPosted={put} />
      <OpenMessage onFound={put} />
      {loadError && <ErrorNotice error={loadError} />}
      {changes.error && <ErrorNotice error={changes.error} />}
      <ul className="message-list" aria-label="Messages">
        {messages.map((m) => (
          <MessageItem key={m.id} message={m} onSaved={put} />
        ))}
      </ul>
      {messages.length === 0 && <p className="empty">No messages yet. Post the first one.</p>}
    </div>
  );
}

/**
 * A form's submit handler and the error it shows: `submit` stops the browser's own submission, clears the
 * error and runs `action`, whose answer is the text of the error to show (null: none).
 */
function useFormAction(action: () => Promise<string | null>) {
  const [error, setError] = useState<string | null>(null);
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setError(null);
    setError(await action());
  };
  return { error, submit };
}

/** A text input whose placeholder is also its accessible name (`aria-label`). */
function PlaceholderInput(props: { label: string; value: string; onChange: (value: string) => void }) {
  return (
    <input
      aria-label={props.label}
      placeholder={props.label}
      value={props.value}
      onChange={(e) => props.onChange(e.target.value)}
    />
  );
}

function PostMessage({ onPosted }: { onPosted: (m: Message) => void }) {
  const [author, setAuthor] = useState(() => localStorage.getItem(AUTHOR_KEY) ?? '');
  const [content, setContent] = useState('');
  const [state, create] = useMutation(CreateMessageMutation);
  const { error, submit } = useFormAction(async () => {
    localStorage.setItem(AUTHOR_KEY, author);
    const result = await create({ input: { content, author: author.trim() || null } });
    if (result.error) return errorText(result.error);
    if (result.data?.createMessage) {
      onPosted(result.data.createMessage);
      setContent('');
    }
    return null;
  });
  return (
    <form className="post-message" onSubmit={submit} aria-label="Post a message">
      <PlaceholderInput label="Your name" value={author} onChange={setAuthor} />
      <textarea
        aria-label="Message"
        placeholder="Write a message"
        value={content}
        onChange={(e) => setContent(e.target.value)}
        rows={3}
      />
      {error && <ErrorNotice error={error} />}
      <button type="submit" disabled={state.fetching || content.trim() === ''}>
        Post
      </button>
    </form>
  );
}

function OpenMessage({ onFound }: { onFound: (m: Message) => void }) {
  const client = useClient();
  const [id, setId] = useState('');
  const { error, submit } = useFormAction(async () => {
    const result = await client
      .query(GetMessageQuery, { id: id.trim() }, { requestPolicy: 'network-only' })
      .toPromise();
    if (result.error) return errorText(result.error);
    if (!result.data?.getMessage) return `No message has the id “${id.trim()}”.`;
    onFound(result.data.getMessage);
    setId('');
    return null;
  });
  return (
    <form className="open-message" onSubmit={submit} aria-label="Open a message by id">
      <PlaceholderInput label="Message id" value={id} onChange={setId} />
      <button type="submit" disabled={id.trim() === ''}>
        Open
      </button>
      {error && <ErrorNotice error={error} />}
    </form>
  );
}

function MessageItem({ message, onSaved }: { message: Message; onSaved: (m: Message) => void }) {
  const [editing, setEditing] = useState(false);
  const [content, setContent] = useState(message.content ?? '');
  const [state, update] = useMutation(UpdateMessageMutation);
  const { error, submit: save } = useFormAction(async () => {
    const result = await update({ id: message.id, input: { content, author: message.author } });
    if (result.error) return errorText(result.error);
    if (result.data?.updateMessage) {
      onSaved(result.data.updateMessage);
      setEditing(false);
    }
    return null;
  });
  return (
    <li className="message" data-id={message.id}>
      {editing ? (
        <form onSubmit={save} aria-label="Edit message">
          <textarea
            aria-label="Edit message"
            value={content}
            onChange={(e) => setContent(e.target.value)}
            rows={3}
          />
          {error && <ErrorNotice error={error} />}
          <div className="actions">
            <button type="submit" disabled={state.fetching}>
              Save
            </button>
            <button type="button" onClick={() => setEditing(false)}>
              Cancel
            </button>
          </div>
        </form>
      ) : (
        <>
          <p className="content">{message.content}</p>
          <p className="meta">
            <span className="author">{message.author ?? 'anonymous'}</span>{' '}
            <code title="Message id">{message.id.slice(0, 8)}</code>{' '}
            <button
              type="button"
              className="link"
              onClick={() => {
                setContent(message.content ?? '');
                setEditing(true);
              }}
            >
              Edit
            </button>
          </p>
        </>
      )}
    </li>
  );
}
