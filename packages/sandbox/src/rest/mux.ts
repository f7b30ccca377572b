/**
 * Client side of the multiplexed exec stream `GET /v1/executions/stream` (framing in `wire.ts`): one
 * persistent, authenticated WebSocket per REST runtime carries every execution it starts, so an exec
 * costs one frame each way instead of a TCP connection and an HTTP upgrade.
 *
 * The connection is opened on first use and reopened after a drop; while no execution is in flight its
 * socket is unreferenced, so an idle runtime never keeps the Node.js process alive.
 */
import type { Socket } from 'node:net';
import { WebSocket } from 'ws';
import { BoxError } from '../errors.ts';
import {
  boxErrorOf,
  type Channel,
  controlMessageOf,
  isStreamNumber,
  MUX_HEADER_BYTES,
  muxFrame,
  readRefusal,
} from './wire.ts';

/** What one execution on the multiplexed stream is told. */
export interface MuxStreamHandler {
  /** Output bytes of channel 1 (stdout) or 2 (stderr). */
  data(channel: Channel, payload: Buffer): void;
  /** A control message of this stream (`started`, `error`, `exit`, `backlog_truncated`). */
  control(message: Record<string, unknown>): void;
  /**
   * The connection is gone: dropped (`refused` null) or refused at the upgrade (`refused` is the error,
   * `status` its HTTP status; 404 means a server without the multiplexed stream).
   */
  closed(refused: BoxError | null, status: number): void;
}

/** The multiplexed exec WebSocket of one REST runtime. */
export class ExecMux {
  readonly #url: string;
  readonly #headers: Record<string, string>;
  readonly #streams = new Map<number, MuxStreamHandler>();
  #socket: WebSocket | null = null;
  #tcp: Socket | null = null;
  #next = 1;

  /** @param url `ws(s)://host:port` of the server; `headers` carry the bearer credential. */
  constructor(url: string, headers: Record<string, string>) {
    this.#url = `${url}/v1/executions/stream`;
    this.#headers = headers;
  }

  /** Number of executions in flight on this connection. */
  get size(): number {
    return this.#streams.size;
  }

  /**
   * Starts an execution: `start` is `{ box, cmd, args?, env?, tty?, cwd?, user? }`. Returns its stream
   * number; the handler then gets its frames until `exit`, `error` or `closed`.
   */
  start(start: Record<string, unknown>, handler: MuxStreamHandler): number {
    const stream = this.#next;
    this.#next = this.#next >= 0xffffffff ? 1 : this.#next + 1;
    this.#streams.set(stream, handler);
    this.#tcp?.ref();
    this.#send(JSON.stringify({ type: 'start', stream, ...start }));
    return stream;
  }

  /** Forgets a stream (its execution exited or failed). */
  release(stream: number): void {
    this.#streams.delete(stream);
    if (this.#streams.size === 0) this.#tcp?.unref();
  }

  /** Sends stdin bytes of a stream; `done` once written (or with the error). */
  stdin(stream: number, data: Uint8Array, done: (error?: Error) => void): void {
    this.#send(muxFrame(0, stream, data), done);
  }

  /** Sends a control message (`stdin_eof`, `signal`, `resize`) of a stream. */
  control(stream: number, message: Record<string, unknown>, done: (error?: Error) => void): void {
    this.#send(JSON.stringify({ ...message, stream }), done);
  }

  /** Drops the connection as a network failure would (tests of the reconnect path). */
  drop(): void {
    this.#socket?.terminate();
  }

  /** Closes the connection (executions in flight see a drop and reattach one by one). */
  close(): void {
    this.#socket?.close(1000, 'closing');
  }

  #send(data: Buffer | string, done?: (error?: Error) => void): void {
    const socket = this.#socket ?? this.#open();
    if (socket.readyState === WebSocket.OPEN) {
      socket.send(data, (error) => done?.(error ?? undefined));
    } else {
      // Still connecting: ws queues nothing before open, so wait for it.
      const onOpen = () => {
        socket.off('close', onClose);
        socket.send(data, (error) => done?.(error ?? undefined));
      };
      const onClose = () => {
        socket.off('open', onOpen);
        done?.(new BoxError('the exec stream to the REST runtime closed', { code: 'unavailable' }));
      };
      socket.once('open', onOpen);
      socket.once('close', onClose);
    }
  }

  #open(): WebSocket {
    const socket = new WebSocket(this.#url, { headers: this.#headers, perMessageDeflate: false });
    this.#socket = socket;
    socket.setMaxListeners(0);
    socket.on('upgrade', (response) => {
      this.#tcp = response.socket as Socket;
      if (this.#streams.size === 0) this.#tcp.unref();
    });
    socket.on('message', (data: Buffer, isBinary) => {
      if (isBinary) {
        if (data.length < MUX_HEADER_BYTES) return;
        this.#streams.get(data.readUInt32BE(1))?.data(data[0] as Channel, data.subarray(MUX_HEADER_BYTES));
        return;
      }
      const message = controlMessageOf(data);
      if (message && isStreamNumber(message.stream)) this.#streams.get(message.stream)?.control(message);
    });
    socket.on('unexpected-response', (_request, response) => {
      readRefusal(response, (status, body) => {
        this.#gone(socket, boxErrorOf(status, body, 'exec stream'), status);
        socket.terminate();
      });
    });
    socket.on('error', (error) => {
      if (socket.readyState !== WebSocket.OPEN)
        this.#gone(
          socket,
          new BoxError(`cannot reach the REST runtime: ${error.message}`, { code: 'unavailable' }),
          0,
        );
    });
    socket.on('close', () => this.#gone(socket, null, 0));
    return socket;
  }

  #gone(socket: WebSocket, refused: BoxError | null, status: number): void {
    if (this.#socket !== socket) return;
    this.#socket = null;
    this.#tcp = null;
    const streams = [...this.#streams.values()];
    this.#streams.clear();
    for (const handler of streams) handler.closed(refused, status);
  }
}
